# The texts of the client's errors, loaded only when one is raised (errors.say formats
# them with the codec's reasons.text(), in the codec's table format): on a board a message
# held by a loaded module costs RAM all the time, about 80 bytes each on the 64-bit
# unix port. One line per error: key, rule ("." for none), message; "%T" prints a
# packet type's name.
TEXT = """
inflight_q .             need 1 <= max_inflight <= queue_size
pw_no_user MQTT-3.1.2-22 a password needs a user name in MQTT 3.1.1
qos        .             qos must be 0, 1 or 2
will_topic .             the will needs a topic
too_big    .             message of %d bytes does not fit max_packet (%d)
queue_full .             outbound queue full: %d messages accepted and not yet completed; retry after acknowledgements, or give the client a larger queue_size or a store=
no_pid     .             no free packet identifier
subs_full  .             subscription table full (max_subscriptions=%d)
store_arg  .             store= takes a directory path, a block device or a store object
not_conn   .             not connected
no_cb      .             set_callback() before subscribe(), or messages have nowhere to go
sub_refuse .             broker refused the subscription to %r
timeout    .             timed out after %d ms
closed     .             connection closed by the broker
refused    .             broker refused the connection: %s (CONNACK return code %d)
taken_over .             the broker closed the connection right after accepting it %d times in a row: another client is using client id %r (ids must be unique per device)
no_connack .             no CONNACK within %d ms
no_pong    .             no answer from the broker within keepalive (%d s) + 100 ms of PINGREQ
stalled    .             nothing could be written for 2 x keepalive (%d s)
malformed  .             malformed packet from the broker: %s
first_pkt  .             expected CONNACK, got %T
pong_body  .             PINGRESP with a body
unexpected .             unexpected %T from the broker
half_pkt   .             a packet stopped arriving half-way: nothing more for %d ms
rx_mem     .             no memory to keep the id of inbound QoS 2 message %d until PUBREL; not acknowledged, so the broker delivers it again
suback_cnt MQTT-3.8.4-5 SUBACK with %d return codes for a SUBSCRIBE of one topic filter
stray_ack  .             %T for packet id %d, which is not awaiting one
acks_full  .             too many acknowledgements waiting to be written
ring_crypt .             partition %r is encrypted: the ring store needs a plain data partition (no 'encrypted' flag in the partition table); FileStore works on an encrypted filesystem
ring_small .             the ring store needs a partition of at least 3 blocks, this one has %d
ring_block .             max_packet %d does not fit a %d-byte flash block
ring_full  .             message store full: %d messages wait to be sent; the partition has %d blocks of %d bytes
files_full .             message store full: %d files in %s (max_files=%d)
fs_reserve .             message store full: fewer than %d free blocks left on the filesystem holding %s
fs_full    .             message store full: the filesystem holding %s has no room (%s)
rec_gone   .             stored record %d is missing
ram_small  .             a RamStore needs at least 3 blocks of block_size bytes
long_head  .             no memory for %d bytes to read a received packet into (up to max_packet, or a long topic whole)
"""

# The texts of the codec's errors and the names of packet types and CONNACK codes.
# On a board every string constant of a loaded module sits in RAM for as long as
# the module does (about 80 bytes for a message, on the 64-bit unix port), and even a
# short one, interned, costs a dozen bytes, so wire.py (the module the client loads)
# names an error by its line number here, the host modules by its key, and fail_as()
# loads this table only when an error is raised.

NAMES = (
    "type 0",
    "CONNECT",
    "CONNACK",
    "PUBLISH",
    "PUBACK",
    "PUBREC",
    "PUBREL",
    "PUBCOMP",
    "SUBSCRIBE",
    "SUBACK",
    "UNSUBSCRIBE",
    "UNSUBACK",
    "PINGREQ",
    "PINGRESP",
    "DISCONNECT",
    "type 15",
)

# CONNACK return codes (§3.2.2.3), by value.
CONNACK_REASONS = (
    "connection accepted",
    "unacceptable protocol version",
    "identifier rejected",
    "server unavailable",
    "bad user name or password",
    "not authorized",
)

# CONNECT's length-prefixed fields, in their order (%F): 3 and 5 are binary data (§1.5.6).
FIELDS = ("protocol name", "client identifier", "will topic", "will message", "user name", "password")

# The rule a packet type's flag nibble breaks when it is wrong (Table 2.2).
FLAG_RULES = (
    "§2.2.1",
    "MQTT-2.2.2-2",
    "MQTT-2.2.2-2",
    "",
    "MQTT-2.2.2-2",
    "MQTT-2.2.2-2",
    "MQTT-3.6.1-1",
    "MQTT-2.2.2-2",
    "MQTT-3.8.1-1",
    "MQTT-2.2.2-2",
    "MQTT-3.10.1-1",
    "MQTT-2.2.2-2",
    "MQTT-2.2.2-2",
    "MQTT-2.2.2-2",
    "MQTT-3.14.1-1",
    "§2.2.1",
)

# One line per error: key, rule, message. "%T", the first placeholder where it is used,
# takes a packet type number and prints its name, "%F" a CONNECT field number (FIELDS);
# rule "-" is worked out from that number (see text()), "." means none. One string, not a
# dict of tuples, because this table is what an error costs while it is loaded. wire.py
# names its errors by line number (_KEY = const(line), the first 42 lines), the other
# modules by key: append new lines, never insert (a test ties wire's numbers to the lines).
TEXT = """
rsvd_type  §2.2.1        reserved packet type %d
qos3       MQTT-3.3.1-4  PUBLISH with QoS 3
dup_qos0   MQTT-3.3.1-2  DUP set on a QoS 0 PUBLISH
flags      -             %T with flags 0x%x, must be 0x%x
body_max   §2.2.3        packet body of %d bytes is over the 268435455 limit
no_fit     §2.2.3        %T of %d bytes does not fit a %d-byte buffer (max_packet)
rl_long    §2.2.3        remaining length longer than 4 bytes
over_max   §2.2.3        packet of %d bytes is over max_packet (%d)
pid_range  MQTT-2.3.1-1  %T needs a packet identifier in 1..65535, got %r
qos_will   MQTT-3.1.2-14 QoS must be 0, 1 or 2, got %r
qos_sub    MQTT-3.8.3-4  QoS must be 0, 1 or 2, got %r
field_long -             %F of %d bytes is longer than 65535
cid_empty  MQTT-3.1.3-7  an empty client identifier needs clean_session=True
keepalive  §3.1.2.10     keepalive must be 0..65535 seconds, got %r
will_part  MQTT-3.1.2-11 will QoS, retain or message given without a will topic
pw_no_user MQTT-3.1.2-22 a password needs a user name in MQTT 3.1.1
sub_empty  MQTT-3.8.3-3  SUBSCRIBE needs at least one topic filter
unsub_none MQTT-3.10.3-2 UNSUBSCRIBE needs at least one topic filter
ack_len    -             %T remaining length must be 2, got %d
pid_zero   MQTT-2.3.1-1  %T with packet identifier 0
connack_n  §3.2.1        CONNACK remaining length must be 2, got %d
connack_f  §3.2.2.1      CONNACK acknowledge flags 0x%02x: bits 7-1 are reserved
connack_rc §3.2.2.3      CONNACK return code %d is reserved
connack_sp MQTT-3.2.2-4  CONNACK refusal with session present set
suback_rc  MQTT-3.9.3-2  SUBACK return code 0x%02x is reserved
suback_n   §3.9.3        SUBACK needs a packet identifier and at least one return code
pub_short  §3.3.2        PUBLISH too short for its topic length
pub_tlen   §3.3.2        PUBLISH topic length %d runs past the packet end
pub_notop  MQTT-4.7.3-1  PUBLISH with an empty topic name
pub_wild   MQTT-3.3.2-2  wildcard in a received topic name
pub_pid0   MQTT-2.3.1-1  QoS %d PUBLISH with packet identifier 0
empty      MQTT-4.7.3-1  topic %s is empty
topic_long MQTT-4.7.3-3  topic %s of %d bytes is longer than 65535
name_wild  MQTT-4.7.1-1  wildcard %c in a topic name
hash_last  MQTT-4.7.1-2  '#' must be the last character of a topic filter
hash_lvl   MQTT-4.7.1-2  '#' must follow a '/' or stand alone
plus_lvl   MQTT-4.7.1-3  '+' must occupy a whole topic level
u0         MQTT-1.5.3-2  U+0000 in a UTF-8 string
u8_start   MQTT-1.5.3-1  byte 0x%02x cannot start a UTF-8 character
u8_short   MQTT-1.5.3-1  UTF-8 character cut short at the end of the string
u8_surr    MQTT-1.5.3-1  UTF-16 surrogate encoded in a UTF-8 string
u8_bad     MQTT-1.5.3-1  ill-formed UTF-8 sequence
pub_pid    MQTT-2.3.1-1  a QoS %d PUBLISH needs a packet identifier in 1..65535, got %r
pid_qos0   MQTT-2.3.1-5  a QoS 0 PUBLISH carries no packet identifier
qos_pub    MQTT-3.3.1-4  QoS must be 0, 1 or 2, got %r
str_long   §1.5.3        %s of %d bytes is longer than 65535
u8_enc     MQTT-1.5.3-1  %s is not encodable as UTF-8
"""


def text(key, values, table=TEXT):
    """The message for an error key (a line's name, or its number) and its values, ending in
    " [rule]" (none for rule "."). The client's own errors use this with their table
    (fleetwire.reasons)."""
    if not isinstance(key, str):  # line number key
        i = 0
        for _ in range(key):
            i = table.index("\n", i) + 1
        key = table[i : table.index(" ", i)]
    i = table.index("\n" + key + " ") + len(key) + 1
    e = table.index("\n", i)
    rule, msg = table[i:e].split(None, 1)
    if "%T" in msg:  # the first value is a packet type
        t = values[0]
        msg = msg.replace("%T", "%s")
        values = (NAMES[t],) + tuple(values[1:])
        if rule == "-":
            rule = FLAG_RULES[t] if key == "flags" else "§3.%d.1" % t
    elif "%F" in msg:  # the first value is a CONNECT field
        t = values[0]
        msg = msg.replace("%F", "%s")
        values = (FIELDS[t],) + tuple(values[1:])
        rule = "§1.5.6" if t == 3 or t == 5 else "§1.5.3"
    msg = msg % tuple(values)
    return msg if rule == "." else msg + " [" + rule + "]"

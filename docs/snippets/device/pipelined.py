# Pipelined QoS 1: many messages in flight instead of one per round trip.
from fleetwire import MQTTClient

c = MQTTClient("sensor-17", "broker.local", queue_size=16)
c.connect()
done = []
c.on_delivered = done.append  # called with the packet id on PUBACK
for i in range(100):
    while c.pending >= 16:  # wait for room: a full queue raises QueueFull, which costs heap
        c.loop(10)
    c.publish(b"fleet/sensor-17/log", b"reading %d" % i, qos=1, block=False)
while c.pending:
    c.loop(10)
c.disconnect()
print(len(done), "delivered")

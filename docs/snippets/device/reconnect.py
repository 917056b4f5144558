# A device that stays connected: the client reconnects by itself (backoff with jitter),
# resends what was in flight and resubscribes; meanwhile publish() queues.
import time

from fleetwire import MQTTClient

c = MQTTClient("sensor-17", "broker.local", keepalive=30, reconnect=True)
c.on_disconnect = lambda reason: print("lost:", reason)
c.on_reconnect = lambda attempt, delay_ms: print("retry", attempt, "in", delay_ms, "ms")
while True:  # the first connect is the program's to retry
    try:
        c.connect(clean_session=False)
        break
    except OSError as e:
        print("broker not reachable:", e)
        time.sleep(5)
for i in range(20):
    if c.pending < 16:  # queue_size: while offline the queue fills up
        c.publish(b"fleet/sensor-17/temp", b"%d" % (200 + i), qos=1, block=False)
    c.loop(50)  # all I/O, keepalive and reconnecting happen here
while c.pending:
    c.loop(50)
print("sent, connected:", c.is_connected())

# The chaos bench's device side (MicroPython unix port or CPython): publish up to N
# numbered QoS 2 (or 1) messages without blocking through a link that keeps
# breaking, reconnecting by itself, until a line on stdin says stop; then wait until
# every one is acknowledged. Prints one JSON line: published, reconnects, seconds.
# argv: host port client_id topic qos n keepalive
import sys
import json
import select
from fleetwire import MQTTClient, MQTTException, QueueFull

try:
    from time import ticks_ms, ticks_diff
except ImportError:  # CPython: the client's own stand-ins
    from fleetwire.cpython import ticks_ms, ticks_diff


host, port, cid, topic = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
qos, n, keepalive = int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7])
stats = {"connected": 0, "lost": 0}


def connected(present):
    stats["connected"] += 1


def lost(reason):
    stats["lost"] += 1


c = MQTTClient(
    cid,
    host,
    port,
    keepalive=keepalive,
    reconnect=True,
    backoff_min=0.005,
    backoff_max=0.01,
    max_inflight=8,
    queue_size=16,
    takeover_kicks=0,
)
c.on_connect = connected
c.on_disconnect = lost
t0 = ticks_ms()
while True:
    try:
        c.connect(False)
        break
    except (OSError, MQTTException):  # the very first connection may be cut too
        pass
topic_b = topic.encode()
stdin = select.poll()
stdin.register(sys.stdin, select.POLLIN)
i = 0
while i < n or c.pending:
    if i < n and i % 64 == 0 and stdin.poll(0):
        n = i  # told to stop: finish what is out
    if i < n:
        try:
            c.publish(topic_b, b"%06d" % i, False, qos, block=False)
            i += 1
            continue
        except QueueFull:
            pass
    c.loop(5)
ms = ticks_diff(ticks_ms(), t0)
c.disconnect()
print(
    json.dumps(
        {"published": i, "lost_links": stats["lost"], "connects": stats["connected"], "seconds": ms / 1000}
    )
)

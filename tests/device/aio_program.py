# The asyncio front as a device program: connect, subscribe, publish N messages
# (each awaited until the broker completed it) while receiving M, reconnecting
# through whatever the link does meanwhile; then print one JSON line of results.
# argv: host port client_id topic qos n_out n_in
import sys
import json
import asyncio
from fleetwire.aio import AsyncClient

host, port, cid, topic = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
qos, n_out, n_in = int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7])
got = []
events = {"lost": 0, "connected": 0, "retry": 0}


def count(kind):
    def f(*a):
        events[kind] += 1

    return f


async def main():
    c = AsyncClient(
        cid, host, port, keepalive=5, reconnect=True, backoff_min=0.02, backoff_max=0.1, timeout=20
    )
    c.set_callback(lambda t, m: got.append(m.decode()))
    c.on_disconnect = count("lost")
    c.on_connect = count("connected")
    c.on_reconnect = count("retry")
    await c.connect(clean_session=False)
    await c.subscribe(topic + "/in", 2)
    print("ready")
    for i in range(n_out):
        await c.publish(topic + "/out", "m%04d" % i, qos=qos)
    for _ in range(400):
        if len(got) >= n_in:
            break
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.3)  # a late duplicate would come now
    print(json.dumps({"got": got, "events": events, "pending": c.pending}))
    await c.disconnect()


asyncio.run(main())

# The asyncio front takes a burst of QoS 1 messages that arrives in one read: connect,
# subscribe to "a" at QoS 1, say "ready", then print how many messages arrived once n
# have (or after 10 s). argv: host port n
import sys
import asyncio
from fleetwire.aio import AsyncClient

host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
got = []


async def main():
    c = AsyncClient("burst", host, port)
    c.set_callback(lambda t, m: got.append(m))
    await c.connect()
    await c.subscribe("a", 1)
    print("ready")
    for _ in range(200):
        if len(got) >= n:
            break
        await asyncio.sleep(0.05)
    print(len(got))
    await c.disconnect()


asyncio.run(main())

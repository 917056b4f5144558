# The asyncio front takes what arrives in one read: connect, subscribe to "a" at QoS 1, say
# "ready", then print how many messages arrived once n have (or after 10 s). With max_packet
# given, messages longer than it come in pieces: each message is printed as bytes/pieces.
# argv: host port n [max_packet]
import sys
import asyncio
from fleetwire.aio import AsyncClient

host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
mp = int(sys.argv[4]) if len(sys.argv) > 4 else 0
got = []
cur = [0, 0]  # bytes and pieces of the message coming in


async def main():
    c = AsyncClient("burst", host, port, max_packet=mp or 1024)

    def cb(t, m):
        cur[0] += len(m)
        cur[1] += 1
        if not c.rest:  # its last piece
            got.append("%d/%d" % (cur[0], cur[1]))
            cur[0] = cur[1] = 0

    c.set_callback(cb)
    await c.connect()
    await c.subscribe("a", 1)
    print("ready")
    for _ in range(200):
        if len(got) >= n:
            break
        await asyncio.sleep(0.05)
    print(len(got), " ".join(got) if mp else "")
    await c.disconnect()


asyncio.run(main())

# A device program for the kill test: the client with its store on a file-backed
# emulated flash partition (as the virtual board has), run on MicroPython or CPython.
# FLASH is the flash image file (ring store), or a directory (file store).
#   store_program.py FLASH PORT publish FIRST COUNT   publish FIRST, FIRST+1, ... without
#       connecting, printing "ACCEPTED n" as each publish() returns, COUNT at most; then
#       wait to be killed
#   store_program.py FLASH PORT drain           connect and send what the store holds,
#       then print "DRAINED"
# A last argument "asyncio" runs fleetwire.aio.AsyncClient instead of MQTTClient.
import sys
import time

try:
    from fleetwire.host.portable.norflash import NorFlash
except ImportError:  # MicroPython: host code is on MICROPYPATH by its bare name
    from norflash import NorFlash
from fleetwire import MQTTClient, StoreFull

flash_path, port, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
if flash_path.endswith(".partition"):
    from fleetwire.ring.store import RingStore

    # 8 x 1 KB: the emulated partition lives in the heap on the unix port (on a board it is flash)
    store = RingStore(NorFlash(8, block_size=1024, path=flash_path))
else:
    store = flash_path  # a directory: the client makes a FileStore of it
AIO = sys.argv[-1] == "asyncio"
if AIO:
    import asyncio
    from fleetwire.aio import AsyncClient as MQTTClient

    def pub(topic, msg, qos):
        asyncio.run(c.publish(topic, msg, False, qos, False))

else:

    def pub(topic, msg, qos):
        c.publish(topic, msg, False, qos, block=False)


c = MQTTClient("killed-device", "127.0.0.1", port, store=store, max_inflight=4, max_packet=256, timeout=5)
if mode == "publish":
    i = int(sys.argv[4])
    last = i + int(sys.argv[5])  # publish at most this many, then wait to be killed
    while i < last:
        try:
            pub(b"kill/test", b"%d" % i, 1 + i % 2)
        except StoreFull:
            print("FULL")
            break
        print("ACCEPTED %d" % i)
        i += 1
    print("WAITING")
    while True:
        time.sleep(1)
elif AIO:

    async def drain():
        done = []
        c.on_delivered = done.append
        await c.connect(False)
        while c.pending:
            await asyncio.sleep(0.1)
        await c.disconnect()
        print("DRAINED %d" % len(done))

    asyncio.run(drain())
else:
    done = []
    c.on_delivered = done.append
    c.connect(clean_session=False)
    while c.pending:
        c.loop(100)
    c.disconnect()
    print("DRAINED %d" % len(done))

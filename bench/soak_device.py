# The soak bench's device side (bench/soak.py): the everything program (a ring store on a
# flash partition, reconnect=True, QoS 1 and 2 both ways, a will) on either front, through a
# link the bench keeps resetting. It publishes numbered messages (QoS 1 and 2 in turn) as
# fast as the store takes them, paced, and counts the numbered messages it receives, until a
# line on stdin says stop; then it waits until everything it accepted is complete and prints
# one JSON line. The heap figures are gc.mem_alloc()/mem_free() after gc.collect().
# argv: front host port client_id topic flash_path inbound_max
import sys
import gc
import json
import select
from binascii import hexlify

from fleetwire import MQTTException, QueueFull, StoreFull
from fleetwire.ring.store import RingStore
from flashfile import FlashFile

try:
    from time import ticks_ms, ticks_diff
except ImportError:  # CPython: the client's own stand-ins
    from fleetwire.cpython import ticks_ms, ticks_diff


front, host, port, cid, topic, flash = sys.argv[1:7]
IN_MAX = int(sys.argv[7])  # inbound message numbers the bench may use
AIO = front == "asyncio"
PACE = 20  # ms between publishes
got = bytearray((IN_MAX + 3) // 4)  # times each inbound number arrived: 2 bits each, 3 at most
st = {"accepted": 0, "received": 0, "connected": 0, "lost": 0, "memory_errors": 0, "other_errors": 0}
low = [1 << 30]  # the lowest free heap seen


def cb(t, m):
    # payload b"i<number>": counted without allocating a str
    k = 0
    for b in memoryview(m)[1:]:
        k = k * 10 + b - 48
    sh = (k & 3) * 2
    if k < IN_MAX and (got[k >> 2] >> sh) & 3 < 3:
        got[k >> 2] += 1 << sh
    st["received"] += 1


def connected(present):
    st["connected"] += 1


def lost(why):
    st["lost"] += 1
    if isinstance(why, MemoryError):  # the asyncio front's reader met it: the link ended
        st["memory_errors"] += 1


def failed(e):
    if isinstance(e, MemoryError):
        st["memory_errors"] += 1
    elif not isinstance(e, (OSError, MQTTException)):
        st["other_errors"] += 1


def sample():
    f = gc.mem_free()
    if f < low[0]:
        low[0] = f


store = RingStore(FlashFile(flash, 16, 4096))  # 64 KB of the 256 KB partition's kind
opts = dict(
    keepalive=2,
    reconnect=True,
    backoff_min=0.02,
    backoff_max=0.2,
    max_inflight=8,
    queue_size=16,
    takeover_kicks=0,
    timeout=5,
    store=store,
)
if AIO:
    import asyncio
    from fleetwire.aio import AsyncClient

    c = AsyncClient(cid, host, int(port), **opts)
else:
    from fleetwire import MQTTClient

    c = MQTTClient(cid, host, int(port), **opts)
c.set_callback(cb)
c.on_connect = connected
c.on_disconnect = lost
c.set_last_will(topic + "/will", "gone", qos=1)
pub_topic = (topic + "/out").encode()
sub_topic = topic + "/in"
buf = bytearray(b"o00000")
poll = select.poll()
poll.register(sys.stdin, select.POLLIN)
gc.collect()
start = gc.mem_alloc()


def stopped():
    return poll.poll(0)


def number(i):
    # b"o%05d" % i into a buffer of our own: no str, no bytes made per message
    for k in range(5, 0, -1):
        buf[k] = 48 + i % 10
        i //= 10
    return bytes(buf)  # the store copies it to flash; RAM holds it only till then


quiet = [0, 0]  # when the received count last changed, and that count


def settling(t0):
    # after the stop: until everything accepted is complete, the link is up and nothing
    # has arrived for a second (what the broker held for us during the last outage), or a
    # minute has gone
    now = ticks_ms()
    if st["received"] != quiet[1] or c.pending or not c.is_connected():
        quiet[0] = now
        quiet[1] = st["received"]
    return ticks_diff(now, quiet[0]) < 1000 and ticks_diff(now, t0) < 60000


def report():
    # the inbound counts first, as hex in short lines (nothing large made at a tight heap),
    # then the figures as one JSON line
    gc.collect()
    st["end_alloc"] = gc.mem_alloc()
    top = len(got)
    while top and not got[top - 1]:
        top -= 1
    for k in range(0, top, 32):
        print("IN " + hexlify(got[k : min(k + 32, top)]).decode())
    st["start_alloc"] = start
    st["lowest_free"] = low[0]
    st["pending"] = c.pending
    print(json.dumps(st))


def run_blocking():
    while True:
        try:
            c.connect(False)
            c.subscribe(sub_topic, 2)
            break
        except Exception as e:  # the first connection may be cut too
            failed(e)
    gc.collect()
    global start
    start = gc.mem_alloc()
    t = ticks_ms()
    while not stopped():
        if ticks_diff(ticks_ms(), t) >= PACE:
            t = ticks_ms()
            try:
                c.publish(pub_topic, number(st["accepted"]), False, 1 + st["accepted"] % 2, block=False)
                st["accepted"] += 1
            except (QueueFull, StoreFull):
                pass
            except Exception as e:
                failed(e)
        try:
            c.loop(10)
        except Exception as e:
            failed(e)
        sample()
    t = ticks_ms()
    while settling(t):
        try:
            c.loop(20)
        except Exception as e:
            failed(e)
    report()


async def run_asyncio():
    while True:
        try:
            await c.connect(False)
            await c.subscribe(sub_topic, 2)
            break
        except Exception as e:
            failed(e)
    gc.collect()
    global start
    start = gc.mem_alloc()
    while not stopped():
        try:
            await c.publish(pub_topic, number(st["accepted"]), False, 1 + st["accepted"] % 2, False)
            st["accepted"] += 1
        except (QueueFull, StoreFull):
            pass
        except Exception as e:
            failed(e)
        sample()
        await asyncio.sleep(PACE / 1000)
    t = ticks_ms()
    while settling(t):
        await asyncio.sleep(0.02)
        sample()
    report()


if AIO:
    asyncio.run(run_asyncio())
else:
    run_blocking()

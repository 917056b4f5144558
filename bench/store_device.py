# Runs on the MicroPython unix port (bench/store.py starts it): per-message flash
# cost, time and heap of each store. One JSON line per configuration.
#   micropython store_device.py KIND PAYLOAD OUTSTANDING N
import gc
import json
import sys
import time

import vfs
from norflash import NorFlash
from fleetwire.session import Session
from fleetwire.feed import feed
from fleetwire.ring.store import RingStore
from fleetwire.filestore import FileStore
from fleetwire.codec import wire

PUBACK = 4  # packet type

kind, payload, outstanding, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
BLOCKS = 64  # a 256 KB partition of 4 KB blocks
flash = NorFlash(BLOCKS)
if kind == "file":
    vfs.VfsLfs2.mkfs(flash)
    vfs.mount(vfs.VfsLfs2(flash), "/st")
# RAM of the store: a session with it, less the same session without one
gc.collect()
heap0 = gc.mem_alloc()
s = Session(
    b"bench", 0, False, max_inflight=outstanding, queue_size=outstanding, max_packet=1100, max_subscriptions=1
)
gc.collect()
plain = gc.mem_alloc() - heap0
s = None
gc.collect()
heap0 = gc.mem_alloc()
store = RingStore(flash) if kind == "ring" else FileStore("/st/q", max_files=10000)
s = Session(
    b"bench",
    0,
    False,
    max_inflight=outstanding,
    queue_size=outstanding,
    max_packet=1100,
    max_subscriptions=1,
    store=store,
)
gc.collect()
ram = gc.mem_alloc() - heap0 - plain
s.start(0)
s.pack(0)
feed(s, b"\x20\x02\x01\x00", 0)
ackb = bytearray(4)
topic = b"fleet/bench-device/telemetry"
msg = b"x" * payload
pids = []
rec = (12 + len(topic) + 6 + payload + 3) & ~3
if kind == "ring":  # one full pass over the partition first: steady state erases blocks
    warm = BLOCKS * 4096 // rec + 50
    n = max(n, 2 * warm)
else:
    warm = 400
e0 = p0 = 0
t0 = a0 = 0
for i in range(warm + n):
    if i == warm:
        e0 = sum(flash.erases)
        p0 = flash.programmed
        gc.collect()
        a0 = gc.mem_alloc()
        t0 = time.ticks_us()
    pids.append(s.publish(topic, msg, 1))
    s.pack(0)
    if len(pids) >= outstanding:
        wire.pack_ack(ackb, PUBACK, pids.pop(0))
        feed(s, ackb, 0)
dt = time.ticks_diff(time.ticks_us(), t0)
alloc = gc.mem_alloc() - a0
pkt = len(topic) + 2 + 2 + payload + 2
print(
    json.dumps(
        {
            "kind": kind,
            "payload": payload,
            "outstanding": outstanding,
            "n": n,
            "packet": pkt,
            "erases": (sum(flash.erases) - e0) / n,
            "programmed": (flash.programmed - p0) / n,
            "us": dt / n,
            "ram": ram,
            "alloc": alloc / n,
            "max_block_erases": max(flash.erases),
        }
    )
)

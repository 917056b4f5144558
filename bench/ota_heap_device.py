# The device side of bench/ota_heap.py, on the MicroPython unix port (fleetwire from .mpy):
#   micropython ota_heap_device.py DEVICE_ID HOST PORT MAX_PACKET WINDOW
# A client connects and subscribes, fleetwire.ota's Updater takes the offer the host makes and
# downloads the release into ota/dl.bin (an app bundle) in the working directory, checks it and
# switches to it; its restart() prints the measurements as one JSON line and ends the run.
# Heap in use is gc.mem_alloc() after gc.collect(); "peak" is the most in use at any chunk
# (inside the target's write: the client's message is still alive then), in the check and at
# the switch, each after a collection.
import gc
import json
import sys

import micropython

from fleetwire import MQTTClient
import fleetwire.vitals  # noqa: F401  (a board program has the vitals agent already: not the update's)

dev, host, port, max_packet, window = (
    sys.argv[1],
    sys.argv[2],
    int(sys.argv[3]),
    int(sys.argv[4]),
    int(sys.argv[5]),
)
# "peak" collects at every chunk, "alloc" counts what each chunk allocates (no collections)
sampling = sys.argv[6] == "peak"
R = {}


def used():
    gc.collect()
    return gc.mem_alloc()


peak = [0]


def sample():
    u = used()
    if u > peak[0]:
        peak[0] = u


c = MQTTClient(dev, host, port, keepalive=30, max_packet=max_packet)
c.set_callback(lambda t, m: None)
c.connect()
R["connected"] = used()
micropython.qstr_info()  # "qstr pool: ... n_total_bytes=N": the interned names' table, before
if len(sys.argv) > 7:  # connect only: the smallest heap for the client alone
    print("CONNECTED")
    sys.exit(0)
from fleetwire.ota.agent import Updater  # noqa: E402  (after connect: the updater's own cost is counted)

done = []


def restart():
    sample()
    done.append(1)


def make():
    # in a function: a module-level expression's leftovers on the VM stack would keep what the
    # updater's constructor loaded for the moment (fleetwire.ota.ops) from being collected
    return Updater(
        dev,
        lambda t, p: c.publish(t, p, False, 0, block=False),
        None,
        max_packet=max_packet,
        window=window,
        kind="esp32",
        running="1.0.0",
        restart=restart,
    )


u = make()
R["updater_idle"] = used() - R["connected"]
micropython.qstr_info()  # and after: the updater's names (and the table's new room)
import fleetwire.ota.app as otaapp  # noqa: E402  (loaded by the first offer of an app bundle)


class Measured(otaapp.AppTarget):
    chunks = 0

    def write(self, buf, off, n, at):
        super().write(buf, off, n, at)
        if sampling:
            sample()
        Measured.chunks += 1
        if Measured.chunks == 8:  # well into the download
            R["held_downloading"] = used() - R["connected"]

    def reader(self):
        sample()
        return super().reader()

    def apply(self, m, st, buf, save):
        sample()
        super().apply(m, st, buf, save)
        sample()


u.targets["app"] = Measured()
# what the client and the updater allocate per chunk: gc.mem_alloc() around each loop() that
# handled chunks (a loop() during which the collector ran is left out)
per = {"bytes": 0, "chunks": 0, "updater": 0}


part = []  # a signed offer longer than max_packet comes in pieces (as fleetwire.ota.enable joins them)


def on_msg(t, m):
    if t != u.t_chunk:
        part.append(bytes(m))
        if c.rest:
            return
        m = b"".join(part)
        part.clear()
        return u.handle(t, m)
    a = gc.mem_alloc()
    u.handle(t, m)
    b = gc.mem_alloc()
    if b >= a:
        per["updater"] += b - a


c.set_callback(on_msg)
c.subscribe(u.t_all, 1)
print("READY")
while not done:
    n0 = Measured.chunks
    a = gc.mem_alloc()
    c.loop(20)
    b = gc.mem_alloc()
    k = Measured.chunks - n0
    if k and b >= a and not sampling:
        per["bytes"] += b - a
        per["chunks"] += k
    u.step()
R["peak"] = peak[0] - R["connected"]
R["chunk"] = u.chunk
R["chunks"] = Measured.chunks
R["per_chunk"] = per["bytes"] / per["chunks"] if per["chunks"] else None
R["per_chunk_updater"] = per["updater"] / max(1, Measured.chunks)
R["after_switch"] = used() - R["connected"]
print("RESULT", json.dumps(R))

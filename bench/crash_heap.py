"""What crash capture (fleetwire.crash) holds on a board's heap: the module, and install()
with the buffers the program sizes; and fleetwire.crashsend, which the runner holds from boot
until the records of the last boot are sent. From .mpy on a 32-bit unix port (an ESP32's
object sizes):

    .venv/bin/python bench/crash_heap.py --micropython32 BUILD/plain32/build/micropython

Prints one line a figure: import (the module), install (its state and buffers, as the runner
installs it: fleetwire.crashsend loaded for the call and dropped, its interned names stay),
buffers (what the program sized: the record, its log ring inside it), resident (all of it,
after log() and a crash taken with the heap locked), capture (resident less the buffers),
log+catch (what logging and a crash add: 0), crashsend (loaded again, while records wait);
then the names each step interned (in the heap figures above them).
"""

import argparse
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from fleetwire.host.rig import build, micropython  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--micropython32", default=None, help="a 32-bit unix port (default: the venv's, 64-bit)")
    ap.add_argument("--lines", type=int, default=8)
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--size", type=int, default=1024)
    a = ap.parse_args()
    binary = a.micropython32 or micropython.binary()
    with tempfile.TemporaryDirectory() as d:
        build.build(d, mpy=True)
        env = dict(os.environ, MICROPYPATH=os.path.join(d, "lib"))
        r = subprocess.run(
            [binary, "-X", "heapsize=96K", os.path.join(HERE, "crash_heap_device.py")]
            + [str(a.lines), str(a.width), str(a.size)],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    if r.returncode:
        sys.exit(r.stdout + r.stderr)
    print("%s, lines=%d width=%d size=%d" % (os.path.basename(binary), a.lines, a.width, a.size))
    names, label = {}, None
    for line in r.stdout.splitlines():
        if line.startswith("HEAP "):
            _, what, n = line.split()
            print("  %-10s %6s bytes" % (what, n))
        elif line.startswith("QSTR "):
            label = line.split()[1]
        elif line.startswith("qstr pool:") and label:
            f = dict(kv.split("=") for kv in line.split(":", 1)[1].replace(",", " ").split())
            names[label] = (int(f["n_qstr"]), int(f["n_str_data_bytes"]))
    for a, b in (("start", "import"), ("import", "install")):
        if a in names and b in names:
            n, data = names[b][0] - names[a][0], names[b][1] - names[a][1]
            # each name: its bytes and a NUL (data), and in the pool a pointer, a hash, a length
            print("  names interned by %-8s %3d, %4d bytes (+ about %d in the pool)" % (b, n, data, n * 6))


if __name__ == "__main__":
    main()

"""Codec benchmark: packets per second for encode and decode on CPython and on the
MicroPython unix port, and bytes allocated per operation on MicroPython. Prints a table.

    .venv/bin/python bench/codec.py [--seconds 0.3] [--heap 256K]

The measuring script is bench/codec_device.py, run unchanged by both interpreters;
MicroPython runs it against a freshly built .mpy board tree (`fleetwire build --mpy`).
  encode      the device path: wire.pack_* (PUBLISH: wire.put_publish, as the session
              sends) into one preallocated bytearray
  decode      the device path: PacketReader.feed of the whole packet + the wire body
              reader (publish_fields, ack_id); CONNECT and SUBSCRIBE have no wire
              reader (a server decodes them), so their row is framing only
  check       the receive-side topic checks: wire.check_pub_topic, check_utf8,
              check_name, check_filter on a 26-byte topic (ASCII, or with 2-byte characters)
  obj-encode  packets.<Type>(...).encode() -> bytes
  obj-decode  PacketReader.feed + packets.decode -> a packet object
Rates are wall-clock (time.ticks_us on MicroPython, time.perf_counter on CPython) and
include the Python call; bytes/op is gc.mem_alloc() growth with the collector off.
"""

import argparse
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from fleetwire.host.rig import build, micropython  # noqa: E402

DEVICE = os.path.join(HERE, "codec_device.py")
ORDER = ["encode", "decode", "check", "obj-encode", "obj-decode"]


def parse(out):
    rows = {}
    for line in out.splitlines():
        if line.startswith("ROW "):
            _, kind, name, rate, alloc = line.split()
            rows[(kind, name.replace("_", " "))] = (float(rate), int(alloc))
    if "DONE" not in out:
        raise SystemExit("the bench script did not finish:\n" + out)
    return rows


def run_micropython(seconds, heap):
    with tempfile.TemporaryDirectory() as tmp:
        build.build(tmp, mpy=True)
        r = micropython.run([DEVICE, str(seconds)], lib=os.path.join(tmp, "lib"), heap=heap, timeout=900)
    return parse(r.stdout + r.stderr)


def run_cpython(seconds):
    r = subprocess.run([sys.executable, DEVICE, str(seconds)], capture_output=True, text=True, timeout=900)
    return parse(r.stdout + r.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=0.3, help="time per row (default 0.3)")
    ap.add_argument("--heap", default="256K", help="MicroPython heap (default 256K)")
    args = ap.parse_args()
    mp = run_micropython(args.seconds, args.heap)
    cp = run_cpython(args.seconds)
    keys = sorted(mp, key=lambda k: (ORDER.index(k[0]), list(mp).index(k)))
    print(
        "fleetwire codec, packets/s (MicroPython unix port %s, heap %s; CPython %s)"
        % (micropython.binary(), args.heap, sys.version.split()[0])
    )
    head = "%-11s %-18s %14s %14s %12s" % ("op", "packet", "CPython/s", "MicroPython/s", "MP bytes/op")
    print(head)
    print("-" * len(head))
    last = None
    for kind, name in keys:
        if last and kind != last:
            print()
        last = kind
        c = cp.get((kind, name), (0.0, -1))[0]
        m, alloc = mp[(kind, name)]
        print("%-11s %-18s %14s %14s %12d" % (kind, name, "{:,.0f}".format(c), "{:,.0f}".format(m), alloc))


if __name__ == "__main__":
    main()

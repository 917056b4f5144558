"""Store benchmark: flash cost per message of the ring store (raw partition) and
the file store (one file per message on LittleFS), on the MicroPython unix port
with the emulated NOR flash: a 256 KB partition of 4 KB blocks. Prints a table.

    .venv/bin/python bench/store.py [--n 2000] [--sweep]

Columns: erases and bytes programmed per message (and programmed / packet size),
host time per message (publish + send + PUBACK, emulated flash), RAM the store
adds to the client, heap allocated per message (the emulator's reads included),
and the projected life of the partition at one message a second on flash rated
for 100,000 erase cycles (wear spread over all blocks, as both stores do).
--sweep also runs the power-cut sweep at every flash operation (as CI does, on
CPython) and reports the cut points tried.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from fleetwire.host import build, micropython  # noqa: E402

BLOCKS = 64
CYCLES = 100000


def run(lib, kind, payload, outstanding, n):
    env = dict(os.environ, MICROPYPATH=os.pathsep.join([lib, ".frozen", os.path.join(ROOT, "host")]))
    r = subprocess.run([micropython.binary(), "-X", "heapsize=2M", os.path.join(HERE, "store_device.py"),
                        kind, str(payload), str(outstanding), str(n)],
                       capture_output=True, text=True, env=env, timeout=900)
    if r.returncode:
        sys.exit("%s %s: %s" % (kind, payload, r.stderr))
    return json.loads(r.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=2000, help="messages per ring configuration")
    ap.add_argument("--sweep", action="store_true", help="also run the full power-cut sweep")
    a = ap.parse_args()
    out = tempfile.mkdtemp(prefix="fleetwire-bench-store-")
    try:
        measure(a, out)
    finally:
        shutil.rmtree(out, ignore_errors=True)


def measure(a, out):
    build.build(out, mpy=True)
    lib = os.path.join(out, "lib")
    rows = []
    for payload in (32, 100, 200, 1000):
        for outstanding in (1, 16):
            for kind in ("ring", "file"):
                rows.append(run(lib, kind, payload, outstanding, a.n if kind == "ring" else max(200, a.n // 6)))
    head = ("store", "payload", "out", "packet B", "erases/msg", "prog B/msg", "prog/packet",
            "us/msg", "RAM B", "alloc B/msg", "life (years)")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rows:
        life = BLOCKS * CYCLES / r["erases"] / 31557600 if r["erases"] else float("inf")
        print("| %s | %d | %d | %d | %.4f | %.0f | %.2f | %.0f | %d | %.0f | %.1f |" % (
            r["kind"], r["payload"], r["outstanding"], r["packet"], r["erases"], r["programmed"],
            r["programmed"] / r["packet"], r["us"], r["ram"], r["alloc"], life))
    print()
    for payload in (100, 200, 1000):
        for outstanding in (1, 16):
            ring = [r for r in rows if r["kind"] == "ring" and r["payload"] == payload and r["outstanding"] == outstanding][0]
            f = [r for r in rows if r["kind"] == "file" and r["payload"] == payload and r["outstanding"] == outstanding][0]
            print("payload %4d, %2d outstanding: ring store erases %.0fx fewer than one file per message"
                  % (payload, outstanding, f["erases"] / ring["erases"] if ring["erases"] else float("inf")))
    if a.sweep:
        sys.path.insert(0, os.path.join(ROOT, "tests", "portable"))
        import store_cases
        print("\npower-cut sweep (ring store, CPython): %d cut points, all passed" % store_cases.sweep(1))


if __name__ == "__main__":
    main()

"""What renewing a board's certificate over the air costs its heap (fleetwire.tls.watch and
fleetwire.tls.renew), on the MicroPython unix port, fleetwire from .mpy:

    .venv/bin/python bench/renew_heap.py [--micropython32 BINARY] [--repeat 5]

Over a board program with mutual TLS (the client and fleetwire.identity loaded): the resident
watch (with "cert_renew_days" set) and of it the interned names' table's growth (a full
table grows by a new pool, whose spare room later names take), the work while a renewal
runs (its two modules), the most in use during a switch, and what stays after it (the watch
alone again). Medians of --repeat runs. BINARY: a 32-bit unix port (object sizes as on an
ESP32), e.g. BUILD/plain32/build/micropython as bench/heap.py --build-dir BUILD leaves it. A
port without a TLS module (the plain 32-bit build has none) gets a stand-in `ssl` that takes
the files and holds nothing (bench/standins/ssl.py), so its figures are fleetwire's own: the
certificates' copies in mbedTLS are bench/tls_heap.py's.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from fleetwire.host.identity import pki  # noqa: E402
from fleetwire.host.rig import build, micropython  # noqa: E402

FIGURES = ("resident", "names", "work", "peak", "after")


def board_dir(work, ca, n):
    d = os.path.join(work, "board-%d" % n)
    os.makedirs(os.path.join(d, "tls"))
    issued = ca.issue("bench-renew", days=10, record=False)
    new = pki.sign(ca.key, ca.cert, "bench-renew", issued.key.public_key())
    for name, data in (
        ("ca.der", pki.der(ca.cert)),
        ("cert.der", pki.der(issued.cert)),
        ("key.der", pki.key_der(issued.key)),
        ("new.der", pki.der(new)),
    ):
        with open(os.path.join(d, "tls", name), "wb") as f:
            f.write(data)
    return d


def has_tls(binary):
    r = subprocess.run([binary, "-c", "import tls"], capture_output=True)
    return r.returncode == 0


def run(binary, lib, d, heap):
    path = [lib, ".frozen"]
    if not has_tls(binary):
        path.insert(0, os.path.join(HERE, "standins"))
    env = dict(os.environ, MICROPYPATH=os.pathsep.join(path))
    r = subprocess.run(
        [binary, "-X", "heapsize=" + heap, os.path.join(HERE, "renew_heap_device.py"), d],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    if r.returncode:
        sys.exit("renew_heap_device.py failed:\n" + r.stdout + r.stderr)
    lines = r.stdout.strip().splitlines()
    out = json.loads(lines[-1])
    q = [int(x.rsplit("n_total_bytes=", 1)[1]) for x in lines if x.startswith("qstr pool:")]
    out["names"] = q[1] - q[0]
    assert out.pop("switched"), out
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--micropython32", help="a 32-bit unix port (see BINARY above)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--heap", default="256K")
    a = ap.parse_args()
    ports = [("64-bit", micropython.binary())]
    if a.micropython32:
        ports.append(("32-bit", a.micropython32))
    work = tempfile.mkdtemp(prefix="fleetwire-renew-heap-")
    build.build(work, mpy=True)
    lib = os.path.join(work, "lib")
    ca = pki.FleetCA.create(os.path.join(work, "ca"))
    rows = {}
    n = 0
    for name, binary in ports:
        runs = []
        for _ in range(a.repeat):
            n += 1
            runs.append(run(binary, lib, board_dir(work, ca, n), a.heap))
        rows[name] = {k: statistics.median(r[k] for r in runs) for k in FIGURES}
        rows[name]["tls"] = has_tls(binary)
        print("  %s: %s" % (name, rows[name]), flush=True)
    print()
    print("| bytes over a board with mutual TLS | " + " | ".join(rows) + " |")
    print("| --- |" + " --- |" * len(rows))
    label = {
        "resident": "the watch, resident (`cert_renew_days` set)",
        "names": "of it, the interned names' table (a new pool when it is full)",
        "work": "the work while a renewal runs (`fleetwire.tls.renew`, `.check`)",
        "peak": "most in use during a switch",
        "after": "after the switch (the watch alone again)",
    }
    for k in FIGURES:
        print("| %s | %s |" % (label[k], " | ".join("{:,}".format(int(rows[p][k])) for p in rows)))
    if not all(r["tls"] for r in rows.values()):
        print("\n(%s: no TLS module; the stand-in ssl)" % ", ".join(p for p in rows if not rows[p]["tls"]))


if __name__ == "__main__":
    main()

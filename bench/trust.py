"""What checking a signed release costs a board (fleetwire.ota.trust: RSA, PKCS#1 v1.5 with
SHA-256, e = 65537, in Python over MicroPython's big integers), by key size, on the MicroPython
unix port: fleetwire from .mpy, the check run as the updater runs it for an offer (by itself:
fleetwire.ota.ops loads after it).

    .venv/bin/python bench/trust.py [--micropython32 BINARY] [--repeat 9]

For each port and key size (2048, 3072, 4096 bits):
- trust loaded: the heap fleetwire.ota.trust holds while it is loaded (for the check; it is
  dropped before fleetwire.ota.ops loads for the rest of the offer);
- with the offer parsed: what the updater holds more than when idle, just before the check
  (fleetwire.ota.trust loaded, the signed offer parsed; fleetwire.ota.ops loads only after
  the check, trust dropped);
- a check allocates: bytes one check allocates, no collection meanwhile (the most it needs on
  top of the previous figure);
- time: the median (and the least) of --repeat checks, in ms;
- after: what stays in use once the check is done and the modules dropped: the names their
  first load interned (the interpreter's table keeps them), nothing else.
And the .mpy size of each module of fleetwire.ota. BINARY: a 32-bit unix port (object sizes
and big-integer digits as on an ESP32: 16-bit digits on a 32-bit port), e.g.
BUILD/plain32/build/micropython as bench/heap.py --build-dir BUILD leaves it.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from fleetwire.host.rig import build, micropython  # noqa: E402
from fleetwire.host.identity.signing import ReleaseKeys  # noqa: E402
from fleetwire.host.rollout.release import Release, pack  # noqa: E402

DEVICE = os.path.join(HERE, "trust_device.py")
BITS = (2048, 3072, 4096)


def cases(work):
    rel = Release.from_bytes(pack({"app.py": b"x = 1\n", ".fwversion": b"2.0.0"}))
    out = []
    for bits in BITS:
        k = ReleaseKeys.create(os.path.join(work, "keys-%d" % bits), bits)
        out.append([bits, k.key_set(), k.signer().sign(rel.manifest()).decode()])
    return out


def run(binary, lib, heap, path, repeat):
    env = dict(os.environ, MICROPYPATH=os.pathsep.join([lib, ".frozen"]))
    r = subprocess.run(
        [binary, "-X", "heapsize=" + heap, DEVICE, path, str(repeat)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    res = [json.loads(x[7:]) for x in r.stdout.splitlines() if x.startswith("RESULT ")]
    if r.returncode or len(res) != len(BITS):
        raise RuntimeError("device: %s%s" % (r.stdout[-2000:], r.stderr[-2000:]))
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--micropython32", help="a 32-bit unix port (see BINARY above)")
    ap.add_argument("--heap", default="64K", help="-X heapsize (default %(default)s)")
    ap.add_argument("--repeat", type=int, default=9)
    a = ap.parse_args()
    ports = [("64-bit", micropython.binary())]
    if a.micropython32:
        ports.append(("32-bit", a.micropython32))
    work = tempfile.mkdtemp(prefix="fleetwire-trust-")
    try:
        build.build(work, mpy=True)
        lib = os.path.join(work, "lib")
        path = os.path.join(work, "cases.json")
        with open(path, "w") as f:
            json.dump(cases(work), f)
        rows = {name: run(binary, lib, a.heap, path, a.repeat) for name, binary in ports}
        print("bench/trust.py, -X heapsize=%s, fleetwire from .mpy, median of %d" % (a.heap, a.repeat))
        print()
        names = [n for n, _ in ports]
        print(
            "| RSA key | port | trust loaded | with the offer parsed | a check allocates "
            "| time: median (least) | after |"
        )
        print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
        for i, bits in enumerate(BITS):
            for n in names:
                r = rows[n][i]
                assert r["ok"] is True, r
                print(
                    "| %d | %s | %s | %s | %s | %.1f ms (%.1f) | %s |"
                    % (
                        bits,
                        n,
                        fmt(r["module"]),
                        fmt(r["held"]),
                        fmt(r["alloc"]),
                        r["us"] / 1000,
                        r["min_us"] / 1000,
                        fmt(r["after"]),
                    )
                )
        print()
        d = os.path.join(lib, "fleetwire", "ota")
        sizes = {n: os.path.getsize(os.path.join(d, n)) for n in sorted(os.listdir(d)) if n.endswith(".mpy")}
        print("| module | .mpy bytes |")
        print("| --- | ---: |")
        for n, b in sizes.items():
            print("| `fleetwire.ota.%s` | %s |" % (n[:-4], fmt(b)))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def fmt(v):
    return "{:,}".format(v)


if __name__ == "__main__":
    main()

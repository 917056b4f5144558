"""What mutual TLS costs a board's heap, next to TLS without a client certificate and to no
TLS at all, on the MicroPython unix port (fleetwire from .mpy, against mosquitto).

    .venv/bin/python bench/tls_heap.py [--micropython32 BINARY] [--repeat 3]

Modes: plain (no TLS); tls (the broker's certificate checked against its CA, as before);
mtls (the same SSLContext plus the board's certificate and key: load_cert_chain); identity
(mutual TLS as the board program builds it, fleetwire.identity.Context, whose import is
counted). Keys are EC P-256, as `fleetwire deploy --ca` issues them; the tls broker's
certificate is EC P-256 too, so the columns differ only by the client certificate.
For each, counted from after the client's import: what the TLS context holds, and what a
board holds connected (subscribed, one QoS 1 message delivered, the TLS session open), in
MicroPython's heap (gc.mem_alloc()) and in the C library's heap, where mbedTLS allocates on
the unix port (as on an ESP32 it allocates from ESP-IDF's heap, outside MicroPython's):
bench/malloc_count.c, compiled here with `cc` and preloaded, counts it. Also the most the C
heap held during connect(), connect()'s time, and the smallest -X heapsize in which the run
succeeds. BINARY is a 32-bit unix port built with mbedTLS (object sizes as on an ESP32); a
build without the ssl module is skipped with a note.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from fleetwire.host.rig import build, micropython  # noqa: E402

from fleetwire.host.identity import pki  # noqa: E402
from fleetwire.host.brokers.mosquitto import Mosquitto  # noqa: E402

sys.path.insert(0, HERE)
from client import compile_mpy, smallest  # noqa: E402

DEVICE = os.path.join(HERE, "tls_heap_device.py")
SHIM = os.path.join(HERE, "malloc_count.c")
MODES = ("plain", "tls", "mtls", "identity")
KEYS = ("HEAP_CONTEXT", "SYS_CONTEXT", "HEAP_CONNECT", "SYS_CONNECT", "SYS_PEAK", "HANDSHAKE")


def shim(out, m32):
    """Compile bench/malloc_count.c -> the .so to preload."""
    so = os.path.join(out, "malloc_count%s.so" % ("32" if m32 else ""))
    cmd = ["cc", "-O2", "-shared", "-fPIC", "-o", so, SHIM, "-ldl"] + (["-m32"] if m32 else [])
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        sys.exit("cc failed on %s (a C compiler is needed; -m32 needs gcc-multilib):\n%s" % (SHIM, r.stderr))
    return so


def device(binary, lib, mode, target, heap="512K", preload=None):
    env = dict(os.environ, MICROPYPATH=lib + os.pathsep + ".frozen")
    if preload:
        env["LD_PRELOAD"] = preload
    return subprocess.run(
        [binary, "-X", "heapsize=" + heap, "-m", "tls_heap_device", mode] + list(target),
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


def run(binary, lib, mode, target, preload):
    r = device(binary, lib, mode, target, preload=preload)
    out = {}
    for line in r.stdout.splitlines():
        w = line.split()
        if len(w) == 2 and w[0] in KEYS:
            out[w[0]] = int(w[1])
    if r.returncode or "SYS_CONNECT" not in out:
        sys.exit("tls_heap_device.py %s failed:\n%s%s" % (mode, r.stdout[-1000:], r.stderr[-2000:]))
    return out


def fits(binary, lib, mode, target, kb):
    r = device(binary, lib, mode, target, "%dK" % kb)
    return r.returncode == 0 and "SYS_CONNECT" in r.stdout


def is_32bit(binary):
    with open(binary, "rb") as f:
        return f.read(5)[4] == 1  # ELF class: 1 = 32-bit


def has_ssl(binary):
    r = subprocess.run(
        [binary, "-c", "import ssl"],
        capture_output=True,
        text=True,
        env=dict(os.environ, MICROPYPATH=".frozen"),
    )
    return r.returncode == 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--micropython32", help="a 32-bit build of MicroPython's unix port, with mbedTLS")
    ap.add_argument("--repeat", type=int, default=3, help="runs per measurement (median)")
    args = ap.parse_args()
    binaries = [("64-bit", micropython.binary())]
    if args.micropython32:
        b32 = os.path.abspath(args.micropython32)
        if has_ssl(b32):
            binaries.append(("32-bit", b32))
        else:
            print("note: %s has no ssl module (built without mbedTLS): 64-bit only" % b32)
    with tempfile.TemporaryDirectory(prefix="fw-tls-heap-") as tmp:
        build.build(tmp, mpy=True)
        lib = os.path.join(tmp, "lib")
        compile_mpy(DEVICE, lib, "tls_heap_device")
        ca = pki.FleetCA.create(os.path.join(tmp, "ca"))
        issued = ca.issue("bench-tls")
        files = {"fleet-ca": pki.der(ca.cert), "cert": pki.der(issued.cert)}
        for name, data in files.items():
            pki.write_public(os.path.join(tmp, name + ".der"), data)
        pki.write_private(os.path.join(tmp, "key.der"), pki.key_der(issued.key))
        p = lambda name: os.path.join(tmp, name)  # noqa: E731
        with Mosquitto(tls=True) as server_only, Mosquitto(identity=ca) as mutual:
            cert = (p("cert.der"), p("key.der"))
            targets = {
                "plain": ("127.0.0.1", server_only.port, "bench-tls", "-", "-", "-"),
                "tls": ("localhost", server_only.tls_port, "bench-tls", server_only.ca_der, "-", "-"),
                "mtls": ("localhost", mutual.port, "bench-tls", p("fleet-ca.der")) + cert,
                "identity": ("localhost", mutual.port, "bench-tls", p("fleet-ca.der")) + cert,
            }
            targets = {m: tuple(str(x) for x in t) for m, t in targets.items()}
            res = {}
            for word, binary in binaries:
                preload = shim(tmp, is_32bit(binary))
                for mode in MODES:
                    runs = [run(binary, lib, mode, targets[mode], preload) for _ in range(args.repeat)]
                    r = {k: statistics.median(x[k] for x in runs) for k in runs[0]}
                    r["HEAP"] = smallest(lambda kb: fits(binary, lib, mode, targets[mode], kb), 8, 512)
                    res[word, mode] = r
    words = [w for w, _ in binaries]
    print()
    print(
        "MicroPython unix port, fleetwire from .mpy, bytes counted from after the client's import, "
        "median of %d" % args.repeat
    )
    head = "%-50s" % "" + "".join("%10s" % m for m in MODES) + "%12s" % "mtls - tls"
    rows = (
        ("TLS context, MicroPython heap (bytes)", "HEAP_CONTEXT"),
        ("TLS context, C heap: mbedTLS (bytes)", "SYS_CONTEXT"),
        ("connected, MicroPython heap (bytes)", "HEAP_CONNECT"),
        ("connected, C heap: mbedTLS, socket (bytes)", "SYS_CONNECT"),
        ("most held in the C heap during connect() (bytes)", "SYS_PEAK"),
        ("smallest -X heapsize for the run (KB)", "HEAP"),
        ("connect() (ms)", "HANDSHAKE"),
    )
    for w in words:
        print()
        print(w)
        print(head)
        for label, key in rows:
            row = [res[w, m][key] for m in MODES]
            print("%-50s" % label + "".join("%10d" % v for v in row) + "%12d" % (row[2] - row[1]))


if __name__ == "__main__":
    main()

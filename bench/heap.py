"""Where the device client's heap goes, module by module, on the MicroPython unix port.

    .venv/bin/python bench/heap.py [--umqtt PATH] [--micropython32 BINARY] [--repeat 3]

For each module `from fleetwire import MQTTClient` loads from `.mpy`: the file's size and
the heap its import adds. Then the smallest heap in which the import alone succeeds, and
the heap after connect + subscribe with the default options and with small ones
(max_packet=256, queue_size=4, max_inflight=2, max_subscriptions=2). A module's figure includes any growth of the interned-name (qstr)
pool its import sets off; the pool grows by doubling, so one module can carry part of
another's names (the total is exact).

PATH is micropython-lib's umqtt.simple, as for bench/client.py: its totals are printed
beside fleetwire's. BINARY is a unix port built 32-bit (object sizes as on an ESP32), for
example by `make -C ports/unix CFLAGS_EXTRA=-m32 LDFLAGS_EXTRA=-m32` in a MicroPython
checkout; its figures get a column of their own.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from fleetwire.host import build, micropython  # noqa: E402
from fleetwire.host.mosquitto import Mosquitto  # noqa: E402

sys.path.insert(0, HERE)
from client import compile_mpy, smallest, umqtt_tree  # noqa: E402

DEVICE = os.path.join(HERE, "heap_device.py")


def device(binary, lib, client, broker, options, heap="256K"):
    # the harness runs as .mpy from beside lib (compiled in main()), so that its own
    # compilation takes no part in the smallest heaps
    env = dict(os.environ, MICROPYPATH=lib)
    return subprocess.run([binary, "-X", "heapsize=" + heap, "-m", "heap_device", client, broker.host,
                           str(broker.port), options], capture_output=True, text=True, env=env, timeout=60)


def run(binary, lib, client, broker, options):
    """One run of heap_device.py -> {"MOD <name>": bytes, "IMPORT": bytes, "CONNECT": bytes}."""
    r = device(binary, lib, client, broker, options)
    out = {}
    for line in r.stdout.splitlines():
        w = line.split()
        if w[0] == "UNLISTED":
            sys.exit("heap_device.py's FLEETWIRE list misses %s" % " ".join(w[1:]))
        if w[0] == "MOD":
            out["MOD " + w[1]] = int(w[2])
        elif w[0] in ("IMPORT", "CONNECT"):
            out[w[0]] = int(w[1])
    if r.returncode or "CONNECT" not in out:
        sys.exit("heap_device.py failed (%s %s):\n%s" % (client, options, r.stderr[-2000:]))
    return out


def import_heap(binary, lib, client, broker):
    """The smallest -X heapsize, in KB, in which the client's import succeeds."""
    def ok(kb):
        return device(binary, lib, client, broker, "import", "%dK" % kb).returncode == 0
    return smallest(ok, 2, 256)


def median_run(repeat, *a):
    runs = [run(*a) for _ in range(repeat)]
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def mpy_size(lib, module):
    path = os.path.join(lib, *module.split("."))
    path = path + ".mpy" if os.path.exists(path + ".mpy") else os.path.join(path, "__init__.mpy")
    return os.path.getsize(path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--umqtt", help="micropython-lib checkout or umqtt/simple.py (read at bench time)")
    ap.add_argument("--micropython32", help="a 32-bit build of MicroPython's unix port")
    ap.add_argument("--repeat", type=int, default=3, help="runs per measurement (median)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="fw-heap-") as tmp:
        build.build(tmp, mpy=True)
        lib = os.path.join(tmp, "lib")
        if args.umqtt:
            umqtt_tree(args.umqtt, lib, True)
        compile_mpy(DEVICE, lib, "heap_device")
        binaries = [("64-bit", micropython.binary())]
        if args.micropython32:
            binaries.append(("32-bit", os.path.abspath(args.micropython32)))
        res = {}
        with Mosquitto() as broker:
            for word, binary in binaries:
                res[word, "fleetwire"] = median_run(args.repeat, binary, lib, "fleetwire", broker, "default")
                res[word, "small"] = median_run(args.repeat, binary, lib, "fleetwire", broker, "small")
                res[word, "fleetwire"]["HEAP"] = import_heap(binary, lib, "fleetwire", broker)
                if args.umqtt:
                    res[word, "umqtt"] = median_run(args.repeat, binary, lib, "umqtt", broker, "default")
                    res[word, "umqtt"]["HEAP"] = import_heap(binary, lib, "umqtt", broker)
        words = [w for w, _ in binaries]
        print()
        print("MicroPython unix port, from .mpy, bytes from gc.mem_alloc(), median of %d" % args.repeat)
        print("%-44s%10s" % ("", ".mpy file") + "".join("%12s" % ("heap " + w) for w in words))
        fw = res[words[0], "fleetwire"]
        for key in fw:
            if key.startswith("MOD "):
                name = key[4:]
                print("%-44s%10d" % (name, mpy_size(lib, name))
                      + "".join("%12d" % res[w, "fleetwire"][key] for w in words))
        for w in words:   # the shared codec's part of the import
            r = res[w, "fleetwire"]
            r["CODEC"] = sum(v for k, v in r.items() if k.startswith("MOD fleetwire.codec"))
        rows = [("fleetwire: import", "fleetwire", "IMPORT"),
                ("  of it, the codec modules", "fleetwire", "CODEC"),
                ("fleetwire: smallest heap for the import (KB)", "fleetwire", "HEAP"),
                ("fleetwire: connect + subscribe", "fleetwire", "CONNECT"),
                ("fleetwire: the same, small options", "small", "CONNECT")]
        if args.umqtt:
            rows += [("umqtt.simple: import", "umqtt", "IMPORT"),
                     ("umqtt.simple: smallest heap for the import (KB)", "umqtt", "HEAP"),
                     ("umqtt.simple: connect + subscribe", "umqtt", "CONNECT")]
        for label, who, key in rows:
            print("%-54s" % label + "".join("%12d" % res[w, who][key] for w in words))
        if args.umqtt:
            print("%-54s" % "2x umqtt.simple after connect"
                  + "".join("%12d" % (2 * res[w, "umqtt"]["CONNECT"]) for w in words))


if __name__ == "__main__":
    main()

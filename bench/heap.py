"""The device client's heap beside umqtt.simple and mqtt_as, in one run (issue 19's bench).

    .venv/bin/python bench/heap.py --umqtt PATH --mqtt-as PATH
        (--plain32 BINARY | --micropython-src SRC) [--micropython-src SRC] [--build-dir DIR] [--repeat 3]

For each program: the heap after its import, after connect + subscribe, and the smallest
-X heapsize in which the bench scenario runs (connect, subscribe, 100 QoS 1 publishes,
receive 10 messages), each
  - from .mpy in /lib on a plain 32-bit unix port (an ESP32's object sizes; only the port's
    own modules, asyncio among them, frozen, as in stock firmware),
  - from .mpy on the 64-bit port (.venv/bin/micropython),
  - frozen into a 32-bit port (fleetwire from `fleetwire build`, frozen at opt=3 as
    firmware/manifest.py does; the peers likewise), with --micropython-src.
Programs: umqtt.simple; mqtt_as (asyncio; stand-ins for `network` and `machine` from
bench/standins/, which a board has built in); fleetwire's plain program (umqtt.simple-style:
QoS 0/1, check_msg/wait_msg, no store, reconnect, QoS 2, will or TLS); its everything program
(a RingStore on an emulated flash, QoS 2 both ways, reconnect=True, a will, 8 subscriptions);
fleetwire.aio.AsyncClient beside mqtt_as. Then issue 19's targets, what each step of the
everything and asyncio programs loads, each feature alone over the plain program, and the heap
of each module those programs load (found from sys.modules, not from a list).

Bytes are gc.mem_alloc() deltas after gc.collect() (median of --repeat runs); the smallest heap
is the least -X heapsize, in KB, from which the scenario runs in every heap up to 3 KB more (a
bisection, checked above its answer; then checked --repeat - 1 times more; the median).

PATHs are read at bench time and never committed: --umqtt is micropython-lib (a checkout, or
micropython/umqtt.simple/umqtt/simple.py), --mqtt-as is peterhinch/micropython-mqtt (a checkout,
or mqtt_as/__init__.py). SRC is a micropython/micropython checkout (its lib/micropython-lib, or
--micropython-lib, for the port's manifest; gcc-multilib for -m32): from it the bench builds the
frozen 32-bit port, and the plain one unless --plain32 names a build. --build-dir keeps the builds
(make is incremental: a second run rebuilds little).
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from fleetwire.host.rig import build, micropython  # noqa: E402
from fleetwire.host.brokers.mosquitto import Mosquitto  # noqa: E402

sys.path.insert(0, HERE)
from client import compile_mpy, frozen_build, smallest, umqtt_tree  # noqa: E402

PEERS = ("umqtt", "mqtt_as")
EVERYTHING = "fw+store+qos2+reconnect+will+subs8"
PROGRAMS = (
    ("umqtt", "umqtt.simple"),
    ("mqtt_as", "mqtt_as"),
    ("fw", "fw plain"),
    (EVERYTHING, "fw everything"),
    ("aio", "fw.aio"),
    ("fw+v5", "fw v5"),
    ("aio+v5", "fw.aio v5"),
)
FEATURES = ("store", "filestore", "qos2", "reconnect", "will", "subs8", "unsub", "v5")
FEED = [b"m%d" % i for i in range(10)]
ABOVE = 3  # KB above the smallest heap in which the scenario must run as well (see smallest_heap)


def mqtt_as_tree(path, out, mpy):
    src = path
    if os.path.isdir(path):
        src = os.path.join(path, "mqtt_as", "__init__.py")
    if not os.path.exists(src):
        sys.exit("no mqtt_as at %s" % src)
    pkg = os.path.join(out, "mqtt_as")
    os.makedirs(pkg, exist_ok=True)
    if mpy:
        compile_mpy(src, pkg, "__init__")
    else:
        shutil.copyfile(src, os.path.join(pkg, "__init__.py"))


def board_tree(out, args, mpy):
    """OUT/lib: fleetwire as `fleetwire build` writes it, and the peers given -> the lib dir."""
    build.build(out, mpy=mpy)
    lib = os.path.join(out, "lib")
    if args.umqtt:
        umqtt_tree(args.umqtt, lib, mpy)
    if args.mqtt_as:
        mqtt_as_tree(args.mqtt_as, lib, mpy)
    return lib


class Feeder:
    """Publishes the 10 messages of the scenario to bench/in when the device says READY."""

    def __init__(self, broker):
        import paho.mqtt.client as mqtt

        self.c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="heap-feeder")
        self.c.connect(broker.host, broker.port)
        self.c.loop_start()

    def feed(self, qos):
        for m in FEED:
            self.c.publish("bench/in", m, qos=qos)

    def close(self):
        self.c.loop_stop()
        self.c.disconnect()


class Bench:
    def __init__(self, harness, standins, broker, feeder):
        self.harness, self.standins, self.broker, self.feeder = harness, standins, broker, feeder
        self.timeout = 60  # lowered once healthy runs have been timed

    def run(self, binary, lib, prog, mode, heap="256K"):
        """One device run -> (finished, {"steps": [(name, bytes, modules)], "BASE": n, ...})."""
        # a FileStore's directory, emptied here (a run cut short leaves records to restore),
        # not by the program: code in the harness counts in every program's smallest heap
        shutil.rmtree(os.path.join(self.harness, "heap-fstore"), ignore_errors=True)
        path = [self.harness] + ([self.standins] if prog == "mqtt_as" else []) + ([lib] if lib else [])
        env = dict(os.environ, MICROPYPATH=os.pathsep.join(path + [".frozen"]))
        main = "heap_" + (
            prog if prog in ("mqtt_as", "aio", "modules") else "aio" if prog == "aio+v5" else "sync"
        )
        cmd = [
            binary,
            "-X",
            "heapsize=" + heap,
            "-m",
            main,
            prog,
            mode,
            self.broker.host,
            str(self.broker.port),
        ]
        out = {"steps": [], "mods": []}
        done = False
        t0 = time.time()
        p = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=self.harness
        )
        try:
            for line in self._lines(p, t0):
                w = line.split()
                if not w:
                    continue
                if w[0] == "READY":
                    self.feeder.feed(2 if "qos2" in prog else 1)
                elif w[0] == "STEP":
                    out["steps"].append([w[1], int(w[2]), ()])
                elif w[0] == "MODS":
                    out["steps"][-1][2] = tuple(w[1:])
                elif w[0] == "BASE":
                    out[w[0]] = int(w[1])
                elif w[0] == "MOD":
                    out["mods"].append((w[1], int(w[2]), w[3:]))
                elif w[0] == "DONE":
                    done = True
        finally:
            if p.poll() is None:
                p.kill()
            p.wait()
            err = p.stderr.read()
        out["err"] = err
        out["time"] = time.time() - t0
        return done and p.returncode == 0, out

    def _lines(self, p, t0):
        # stdout lines until EOF or the deadline (a run short of heap can hang in its tasks)
        import selectors

        sel = selectors.DefaultSelector()
        sel.register(p.stdout, selectors.EVENT_READ)
        buf = ""
        while True:
            left = self.timeout - (time.time() - t0)
            if left <= 0 or not sel.select(left):
                return
            chunk = os.read(p.stdout.fileno(), 65536).decode()
            if not chunk:
                return
            buf += chunk
            *lines, buf = buf.split("\n")
            yield from lines

    def steps(self, binary, lib, prog, repeat):
        """Median bytes per step over repeat runs -> {"steps": [(name, bytes, modules)], ...}."""
        runs = []
        for _ in range(repeat):
            ok, out = self.run(binary, lib, prog, "steps")
            if not ok:
                sys.exit("%s failed on %s:\n%s" % (prog, binary, out["err"][-3000:]))
            runs.append(out)
        res = dict(runs[0])
        res["steps"] = [
            (name, statistics.median(r["steps"][i][1] for r in runs), mods)
            for i, (name, _, mods) in enumerate(runs[0]["steps"])
        ]
        res["slowest"] = max(r["time"] for r in runs)
        return res

    def smallest_heap(self, binary, lib, prog, floor_kb, repeat):
        """Median of repeat smallest heaps (KB): the least heap from which the scenario runs in
        every heap up to ABOVE KB more. Whether a heap is enough is not monotonic (the heap a
        program leaves in pieces decides where a block fits: fleetwire's everything program ran in
        42 KB and failed in 43 and 44), so a bisection's answer is checked above it, and bisected
        again past a failure; each repeat checks it still holds and 1 KB less does not."""

        def ok(kb):
            return self.run(binary, lib, prog, "scenario", "%dK" % kb)[0]

        def least(lo):
            h = smallest(ok, lo, 512)
            while h is not None:
                bad = next((k for k in range(h + 1, h + ABOVE + 1) if not ok(k)), None)
                if bad is None:
                    return h
                h = smallest(ok, bad, 512)
            return None

        found = []
        h = None
        for _ in range(repeat):
            if h is None or not ok(h) or ok(h - 1):
                h = least(max(2, floor_kb))
            if h is not None:
                found.append(h)
        return statistics.median(found) if found else None

    def modules(self, binary, lib, names):
        """Heap of each module imported alone, its dependencies first -> [(name, [modules it
        cannot be imported without, that import each other with it], bytes)]."""
        order = list(names)
        seen = {tuple(order)}
        cyclic = set()  # imports each other with its extras (asyncio and asyncio.core): one figure
        for _ in range(4 * len(order)):
            with open(os.path.join(self.harness, "modules.txt"), "w") as f:
                f.write("\n".join(order))
            ok, out = self.run(binary, lib, "modules", "modules.txt")
            if not ok:
                sys.exit("importing the modules one by one (%s) failed:\n%s" % (order, out["err"][-3000:]))
            late = next(
                ((name, extra) for name, _, extra in out["mods"] if extra and name not in cyclic), None
            )
            if late is None:
                res, gone = [], set()
                for name, n, extra in out["mods"]:
                    if name not in gone:
                        gone.update(extra)
                        res.append((name, extra, n))
                return res
            name, extra = late  # it loaded others: import those before it
            new = [m for m in order if m not in extra]
            i = new.index(name)
            new[i:i] = extra
            if tuple(new) in seen:
                cyclic.add(name)
            else:
                seen.add(tuple(new))
                order = new
        sys.exit("no import order measures each module alone: %s" % order)


def at(res, step):
    for name, n, _ in res["steps"]:
        if name == step:
            return n
    return None


def loads(res):
    """[(step, bytes the step added, modules it loaded)] from a steps run."""
    out = []
    prev_n, prev = 0, set(res["steps"][0][2])
    for name, n, mods in res["steps"][1:]:
        out.append((name, n - prev_n, sorted(set(mods) - prev)))
        prev_n, prev = n, set(mods)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--umqtt", help="micropython-lib checkout or umqtt/simple.py (read at bench time)")
    ap.add_argument("--mqtt-as", help="micropython-mqtt checkout or mqtt_as/__init__.py (read at bench time)")
    ap.add_argument("--plain32", help="a plain 32-bit unix port (only the port's own modules frozen)")
    ap.add_argument(
        "--micropython-src",
        help="MicroPython checkout: build the frozen 32-bit port (and the plain one, without --plain32)",
    )
    ap.add_argument(
        "--micropython-lib", help="micropython-lib for the build (default: SRC/lib/micropython-lib)"
    )
    ap.add_argument("--build-dir", help="keep the MicroPython builds here (default: a temporary directory)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per measurement (median)")
    args = ap.parse_args()
    if not args.plain32 and not args.micropython_src:
        ap.error(
            "give --plain32 BINARY or --micropython-src SRC (a plain 32-bit port is the bench's main port)"
        )
    tmp = tempfile.mkdtemp(prefix="fw-heap-")
    try:
        run_bench(args, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run_bench(args, tmp):
    harness = os.path.join(tmp, "harness")
    standins = os.path.join(tmp, "standins")
    os.makedirs(harness)
    os.makedirs(standins)
    # the harness as .mpy, so that compiling it takes no part in the smallest heaps
    for m in ("heap_device", "heap_sync", "heap_mqtt_as", "heap_aio", "heap_modules", "flashfile"):
        compile_mpy(os.path.join(HERE, m + ".py"), harness, m)
    for m in ("network", "machine"):
        compile_mpy(os.path.join(HERE, "standins", m + ".py"), standins, m)
    mpy_lib = board_tree(os.path.join(tmp, "mpy"), args, True)
    programs = [(p, label) for p, label in PROGRAMS if p not in PEERS or getattr(args, p)]
    plain32 = os.path.abspath(args.plain32) if args.plain32 else None
    frozen32 = None
    if args.micropython_src:
        src = os.path.abspath(args.micropython_src)
        blib = args.micropython_lib or os.path.join(src, "lib", "micropython-lib")
        if not os.path.exists(os.path.join(blib, "README.md")):
            sys.exit("no micropython-lib at %s (give --micropython-lib)" % blib)
        bdir = os.path.abspath(args.build_dir) if args.build_dir else os.path.join(tmp, "build")
        if not plain32:
            print("building a plain 32-bit unix port ...", flush=True)
            plain32 = frozen_build(
                src,
                None,
                os.path.abspath(blib),
                os.path.join(bdir, "plain32"),
                m32=True,
                packages=(),
                port_modules=True,
            )
        print("building a 32-bit unix port with the clients frozen ...", flush=True)
        py_lib = board_tree(os.path.join(bdir, "frozen-src"), args, False)
        frozen32 = frozen_build(
            src,
            py_lib,
            os.path.abspath(blib),
            os.path.join(bdir, "frozen32"),
            m32=True,
            packages=("fleetwire", "umqtt", "mqtt_as"),
            port_modules=True,
        )
    configs = [("32-bit plain, .mpy", plain32, mpy_lib), ("64-bit, .mpy", micropython.binary(), mpy_lib)]
    if frozen32:
        configs.append(("32-bit, frozen", frozen32, None))
    for word, binary, _ in configs:
        r = subprocess.run([binary, "-c", "import sys; print(sys.maxsize)"], capture_output=True, text=True)
        bits = 32 if r.stdout.strip() == str(2**31 - 1) else 64
        if bits != int(word[:2]):
            sys.exit("%s is a %d-bit port, not %s" % (binary, bits, word))

    res = {}  # (config, prog) -> steps result, with "HEAP" the smallest heap in KB
    probes = {}
    with Mosquitto() as broker:
        feeder = Feeder(broker)
        b = Bench(harness, standins, broker, feeder)
        try:
            for word, binary, lib in configs:
                for prog, label in programs:
                    print("%s: %s ..." % (word, label), end=" ", flush=True)
                    t0 = time.time()
                    r = res[word, prog] = b.steps(binary, lib, prog, args.repeat)
                    # a healthy run's time, with room: a run short of heap may hang in its tasks
                    b.timeout = max(15, 4 * r["slowest"])
                    floor = int(at(r, "subscribe") // 1024)
                    r["HEAP"] = b.smallest_heap(binary, lib, prog, floor, args.repeat)
                    b.timeout = 60
                    print("%.0f s" % (time.time() - t0), flush=True)
            word, binary, lib = configs[0]
            for f in FEATURES:
                print("%s: fw+%s ..." % (word, f), flush=True)
                probes[f] = b.steps(binary, lib, "fw+" + f, args.repeat)
            loaded = []  # what the programs load after they start (not the harness)
            for r in [res[word, p] for p in ("fw", EVERYTHING, "aio", "fw+v5", "aio+v5")] + list(
                probes.values()
            ):
                for m in r["steps"][-1][2]:
                    if m not in r["steps"][0][2] and m not in loaded:
                        loaded.append(m)
            print("%s: each module alone ..." % word, flush=True)
            mods = b.modules(binary, lib, sorted(loaded))
        finally:
            feeder.close()
    report(args, configs, programs, res, probes, mods, mpy_lib)


def report(args, configs, programs, res, probes, mods, mpy_lib):
    print()
    print("Heap of the device programs on the MicroPython unix port: bytes from gc.mem_alloc() after")
    print(
        "gc.collect(), median of %d runs; smallest heap: the least -X heapsize (KB) from which the"
        % args.repeat
    )
    print(
        "scenario (connect, subscribe, 100 QoS 1 publishes, receive 10) runs in every heap up to %d KB "
        "more (checked %d times)." % (ABOVE, args.repeat)
    )
    print("Ports: " + "; ".join("%s = %s" % (w, b) for w, b, _ in configs))
    names = [p for p, _ in programs]
    have = set(names)
    ratios = [
        (a, c, "%s/%s" % (la, lc))
        for a, la, c, lc in (
            ("fw", "plain", "mqtt_as", "mqtt_as"),
            ("fw", "plain", "umqtt", "umqtt"),
            (EVERYTHING, "every", "mqtt_as", "mqtt_as"),
            ("aio", "aio", "mqtt_as", "mqtt_as"),
        )
        if c in have
    ]
    head = "%-46s" % "" + "".join("%14s" % label for _, label in programs)
    head += "".join("%15s" % r[2] for r in ratios)
    print()
    print(head)
    for word, _, _ in configs:
        for what, key in (
            ("import", "import"),
            ("after connect + subscribe", "subscribe"),
            ("smallest heap (KB)", "HEAP"),
        ):
            vals = {}
            for p in names:
                r = res[word, p]
                vals[p] = r["HEAP"] if key == "HEAP" else at(r, key)
            line = "%-46s" % ("%s: %s" % (word, what))
            for p in names:
                v = vals[p]
                line += "%14s" % ("-" if v is None else "%d" % v)
            for a, c, _ in ratios:
                line += "%15s" % ("%.2f" % (vals[a] / vals[c]) if vals[a] and vals[c] else "-")
            print(line)

    print()
    print("Issue 19's targets (fleetwire's programs against mqtt_as, same run; bytes, or KB for heaps)")
    word0 = configs[0][0]
    frozen = configs[2][0] if len(configs) > 2 else None
    rows = [
        ("1. plain program, after connect + subscribe", word0, "fw", "subscribe", 1.0),
        ("1. plain program, smallest heap (KB)", word0, "fw", "HEAP", 1.0),
        ("1. plain program, frozen 32-bit, after connect", frozen, "fw", "subscribe", 1.0),
        ("2. everything program, after connect + subscribe", word0, EVERYTHING, "subscribe", 1.3),
    ]
    print("%-52s%12s%12s%12s%8s" % ("target", "fleetwire", "mqtt_as", "limit", ""))
    for label, word, p, key, factor in rows:
        if word is None or "mqtt_as" not in have:
            print(
                "%-52s%12s"
                % (
                    label,
                    "(not measured: needs --mqtt-as%s)" % (" and --micropython-src" if word is None else ""),
                )
            )
            continue

        def val(q):
            r = res[word, q]
            return r["HEAP"] if key == "HEAP" else at(r, key)

        f, m = val(p), val("mqtt_as")
        limit = factor * m if m is not None else None
        verdict = "-" if f is None or limit is None else ("pass" if f <= limit else "miss")
        print("%-52s%12s%12s%12s%8s" % (label, f, m, "%d" % limit if limit is not None else "-", verdict))

    print()
    print("What each step loads (%s): heap the step adds, the modules it loads" % word0)
    for p, label in (
        (EVERYTHING, "everything program"),
        ("aio", "fleetwire.aio program"),
        ("fw", "plain program"),
        ("fw+v5", "MQTT 5 program"),
        ("aio+v5", "MQTT 5 fleetwire.aio program"),
    ):
        r = res[word0, p]
        print("  %s (%s)" % (label, p))
        for name, n, new in loads(r):
            print("    %-12s%8d  %s" % (name, n, " ".join(new)))
    print()
    plain = res[word0, "fw"]
    plain_mods = set(plain["steps"][-1][2])
    print("Each feature over the plain program (%s): after connect + subscribe, the difference," % word0)
    print(
        "the scenario's last step, and the modules it loads that the plain program does not (at which step)"
    )
    print("  %-12s%10s%10s%12s  %s" % ("feature", "connect", "+", "end", "modules"))
    print("  %-12s%10d%10s%12d" % ("(plain)", at(plain, "subscribe"), "", plain["steps"][-1][1]))
    for f, r in probes.items():
        extra = []
        seen = set(plain_mods)
        for name, _, new in loads(r):
            for m in new:
                if m not in seen:
                    extra.append("%s (%s)" % (m, name))
                    seen.add(m)
        c = at(r, "subscribe")
        print(
            "  %-12s%10d%10d%12d  %s" % (f, c, c - at(plain, "subscribe"), r["steps"][-1][1], " ".join(extra))
        )
    print()
    print("Each module those programs load, imported alone after its dependencies (%s)" % word0)
    print("  %-34s%10s%10s" % ("module", ".mpy", "heap"))
    for name, extra, n in mods:
        path = os.path.join(mpy_lib, *name.split("."))
        for f in (path + ".mpy", os.path.join(path, "__init__.mpy")):
            if os.path.exists(f):
                size = "%d" % os.path.getsize(f)
                break
        else:
            size = "folder" if os.path.isdir(path) else "frozen"  # a folder: a namespace package
        print("  %-34s%10s%10d" % (name + "".join(" +" + m for m in extra), size, n))
    print("  (an import's figure includes any growth of the interned-name pool it sets off)")
    print()
    for word, _, _ in configs:
        r = res[word, "fw"]
        line = "%s: the harness and interpreter hold %d bytes before any program" % (word, r.get("BASE", 0))
        print(line)


if __name__ == "__main__":
    main()

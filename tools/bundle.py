"""Build an app bundle for over-the-air updates (fleetwire.ota): the board tree as
`fleetwire build` writes it (.mpy unless --py) under lib/, and your app's files at the top,
in one archive the board unpacks beside the running app and switches to as one piece.

  fleetwire bundle --version 1.5.0 --app app.py --app sensors.py --out app-1.5.0.fwb
  fleetwire rollout --release app-1.5.0.fwb ...
"""

import os
import sys


def add_arguments(p):
    p.add_argument("--version", required=True, help="the release's version (1 to 31 characters)")
    p.add_argument(
        "--app",
        action="append",
        default=[],
        metavar="FILE",
        help="a file of the app (app.py, modules beside it; repeat)",
    )
    p.add_argument("--out", required=True, help="the bundle file to write")
    p.add_argument("--py", action="store_true", help="sources instead of .mpy (compiled on the board)")
    p.add_argument("--arch", help="mpy-cross -march (e.g. xtensawin) for native code")


def run(args):
    from fleetwire.host.rollout.release import Release, ReleaseError, bundle

    try:
        sym = None if args.py else os.path.splitext(args.out)[0] + ".symbols.json"
        data = bundle(args.version, args.app, mpy=not args.py, arch=args.arch, symbols=sym)
        rel = Release.from_bytes(data)
    except ReleaseError as e:
        print("fleetwire bundle: %s" % e, file=sys.stderr)
        return 2
    with open(args.out, "wb") as f:
        f.write(data)
    print("wrote %s: app bundle %s, %d bytes, sha256 %s" % (args.out, rel.version, rel.size, rel.sha256))
    if sym:
        print("wrote %s: where its crashes' tracebacks point (keep it beside the bundle)" % sym)
    return 0

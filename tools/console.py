"""A serial console for a board (or a virtual board): timestamped lines, an optional
log file, survives resets and unplugging (reopens the port), and can stop when a
pattern is seen.

  fleetwire console --port /dev/ttyUSB0 --log board.log
  fleetwire console --port /dev/ttyUSB0 --until "main: connected" --timeout 60   # exit 0 when seen
  fleetwire console --port /dev/ttyUSB0 --reset      # restart the board: see it from its boot
"""

import sys


def add_arguments(p):
    p.add_argument("--port", required=True)
    p.add_argument("--log", help="append the lines to this file too")
    p.add_argument("--until", help="stop (exit 0) when a line matches this regex")
    p.add_argument("--timeout", type=float, help="give up after this many seconds (exit 1)")
    p.add_argument("--baud", type=int, default=115200)
    p.add_argument("--wait", action="store_true", help="wait for a port that is not there yet")
    p.add_argument(
        "--reset",
        action="store_true",
        help="once the port is open, stop the program and soft-reset the board (Ctrl-C, Ctrl-D), "
        "so that nothing it prints from boot on is missed",
    )


def run(args):
    from fleetwire.host.rig.console import ConsoleError, console

    try:
        hit = console(
            args.port, args.log, args.until, args.timeout, baud=args.baud, wait=args.wait, reset=args.reset
        )
    except ConsoleError as e:
        print("fleetwire console: %s" % e, file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 0
    if args.until:
        return 0 if hit is not None else 1
    return 0

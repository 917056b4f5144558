"""Get and set boards' desired state, and show drift (fleetwire.desired on the boards).

    fleetwire state get --device board-7
    fleetwire state set config '{"period_s": 10}' --devices fleet.txt --group eu --wait 120
    fleetwire state drift --devices fleet.txt

The desired state is a versioned document, retained on fleet/<id>/cmd/desired; a board applies
what changed, keeps it on flash and reports the version it applied (fleet/<id>/reported). `set`
changes one section (null removes it) and bumps the version; with --wait it waits until the
boards report it. `drift` lists the boards whose reported version is not the desired one, or
that report an error (exit 1 if any)."""

import json
import sys

from fleetwire.tools import options
from fleetwire.tools.cmd import add_targets, connect, targets


def add_arguments(p):
    p.add_argument("action", choices=("get", "set", "drift"), help="what to do")
    p.add_argument("section", nargs="?", help="set: the section to change (config: period_s, loop_ms)")
    p.add_argument("value", nargs="?", help="set: the section's new value, as JSON (null removes it)")
    p.add_argument(
        "--wait", type=float, default=0, metavar="S", help="set: s to wait for the boards to apply it"
    )
    add_targets(p)
    options.add_broker(p)
    options.add_login(p, "operator")


def run(args):
    from fleetwire.host.command.operator import CommandError, NotConnected, bar

    try:
        boards = targets(args)
        if args.action == "set":
            if not args.section or args.value is None:
                raise ValueError(
                    "set needs a section and its value as JSON: state set config '{\"period_s\": 10}'"
                )
            value = json.loads(args.value)
        op = connect(args)
    except (ValueError, OSError) as e:
        print("fleetwire state: %s" % e, file=sys.stderr)
        return 2
    try:
        with op:
            if args.action == "get":
                for b in boards:
                    print(json.dumps({"device": b, "desired": op.desired(b), "reported": op.reported(b)}))
                return 0
            if args.action == "set":
                for b, v in op.set_desired(boards, {args.section: value}).items():
                    print("%s: desired version %d" % (b, v))
                if args.wait:
                    left = op.wait_converged(
                        boards,
                        args.wait,
                        lambda d, t: print("[state] %s applied" % bar(d, t), file=sys.stderr, flush=True),
                    )
                    for b in left:
                        print("%s: not applied within %g s" % (b, args.wait))
                    return 1 if left else 0
                return 0
            rows = op.drift(boards)
            for b, d, r, e in rows:
                print("%s: desired %s, reported %s%s" % (b, d, r, "; error: %s" % e if e else ""))
            print("%d of %d boards drift" % (len(rows), len(boards)))
            return 1 if rows else 0
    except (CommandError, NotConnected) as e:
        print("fleetwire state: %s" % e, file=sys.stderr)
        return 2

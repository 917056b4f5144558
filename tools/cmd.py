"""Send a command to boards and wait for their answers (fleetwire.cmd on the boards).

    fleetwire cmd reboot --device board-7
    fleetwire cmd sample --args '{"period_s": 10}' --devices fleet.txt --group eu --deadline 3600
    fleetwire cmd upload --devices fleet.txt --share 10 --timeout 300

Each board gets the command on fleet/<id>/cmd/run (QoS 1: a board that is away gets it when it
comes back, until --deadline) and answers on fleet/<id>/answer. Progress shows as answers come;
then one line per board: ok (with the result), error, expired, interrupted (the power failed
while it ran: it is not run again) or no answer. Exit 0 when every board answered ok, 1 when
one did not, 2 for a command that could not be sent."""

import json
import sys

from fleetwire.tools import options


def add_targets(p):
    g = p.add_argument_group("boards")
    g.add_argument("--device", action="append", default=[], metavar="ID", help="a board (repeatable)")
    g.add_argument("--devices", metavar="FILE", help="one board id a line, optionally ',group'")
    g.add_argument("--group", help="only the boards of this group (the devices file's second column)")
    g.add_argument("--share", type=float, metavar="PCT", help="a stable share of them, in per cent")
    p.add_argument(
        "--landing",
        metavar="DIR",
        help="land what is sent in this landing zone (DIR/_commands/), for the report's commands and "
        "convergence tables",
    )


def add_arguments(p):
    p.add_argument("name", help="the command's name (a handler the boards registered)")
    p.add_argument("--args", default="null", metavar="JSON", help="its arguments, as JSON (default null)")
    p.add_argument(
        "--deadline", type=float, metavar="S", help="s from now after which a board answers expired, not run"
    )
    p.add_argument("--timeout", type=float, default=60, help="s to wait for the answers (default 60)")
    add_targets(p)
    options.add_broker(p)
    options.add_login(p, "operator")


def targets(args):
    from fleetwire.host.command.operator import read_devices, select

    ids, groups = list(args.device), {}
    if args.devices:
        more, groups = read_devices(args.devices)
        ids += [d for d in more if d not in ids]
    if not ids:
        raise ValueError("which boards? --device ID or --devices FILE")
    return select(ids, groups, args.group, args.share)


def connect(args):
    from fleetwire.host.command.operator import Operator

    why = options.login_problem(args)
    if why:
        raise ValueError(why)
    host, port = args.broker
    login = (args.tls_ca, args.cert, args.key)
    return Operator(host, port, args.user, options.password(), login, landing=args.landing)


def run(args):
    from fleetwire.host.command.operator import CommandError, NotConnected, bar

    try:
        cmd_args = json.loads(args.args)
        boards = targets(args)
        op = connect(args)
    except (ValueError, OSError) as e:
        print("fleetwire cmd: %s" % e, file=sys.stderr)
        return 2
    tty = sys.stderr.isatty()

    def progress(done, total):
        end = "\r" if tty and done < total else "\n"
        if tty or done in (0, total):
            print("[cmd] %s answered" % bar(done, total), end=end, file=sys.stderr, flush=True)

    try:
        with op:
            sent = op.send(boards, args.name, cmd_args, args.deadline)
            got = op.wait(sent, args.timeout, progress)
            if len(got) < len(sent):
                print("[cmd] %s answered" % bar(len(got), len(sent)), file=sys.stderr)
    except CommandError as e:
        print("fleetwire cmd: %s" % e, file=sys.stderr)
        return 2
    except NotConnected as e:
        print("fleetwire cmd: %s" % e, file=sys.stderr)
        return 2
    bad = 0
    for b in boards:
        a = got.get(b)
        if a is None:
            print("%s: no answer within %g s" % (b, args.timeout))
            bad += 1
        elif a.get("status") == "ok":
            print("%s: ok %s" % (b, json.dumps(a.get("result"))))
        else:
            print("%s: %s %s" % (b, a.get("status"), a.get("error") or ""))
            bad += 1
    return 1 if bad else 0

"""Run a simulated fleet: N devices, each fleetwire's own asyncio client and vitals
agent, publishing to fleet/<id>/telemetry through a real broker. They go through a
firmware rollout (the new release crashes more), reboots, Wi-Fi drops, leaking heaps,
draining batteries and a few go silent. --speed compresses time: with --speed 120 a
60 s period is 0.5 s of real time.

  fleetwire sim --devices 200 --broker 127.0.0.1:1883 --period 60 --speed 120 --duration 120
  fleetwire sim --devices 1000 --broker 127.0.0.1:1883 --period 1 --duration 60     # real time
  fleetwire sim --devices 50 --boards 2 --broker 127.0.0.1:1883 --period 5 --duration 60

--boards K adds K virtual boards (the MicroPython unix port running the board's own
main.py, deployed as a board is) reporting as board-0.. beside the simulated devices;
they run in real time only (--speed 1).

--updates: the devices take releases over MQTT (fleetwire.ota, as a board with "ota": true)
instead of the built-in rollout; `fleetwire rollout` offers them one, signed by a key of
--release-keys DIR, which the devices trust as deployed boards do. --bad-release V makes
release V crash more (and some of its first boots crash at once, so those roll back).

  fleetwire sim --devices 200 --speed 120 --duration 900 --updates --bad-release 1.5.0 &
  fleetwire rollout --broker 127.0.0.1:1883 --release app-1.5.0.fwb --discover 10 --landing landing/ ...

--workers N spreads the devices over N processes (one saturates a core at about 3,000
devices): device i runs in worker i % N, with the same id, certificate and story in any; the
summary adds up every worker's counts and names a worker that died (exit status 1).

  fleetwire sim --devices 4000 --workers 2 --broker 127.0.0.1:1883 --period 60 --duration 600

The summary's "lag" says whether the simulator kept its devices' schedule: how late records
went out, and how many it never made because it fell behind (coverage lost to the simulator,
not the fleet). --landing DIR (the collector's landing zone) keeps it in DIR/_sim/, where
`fleetwire report` reads it and says in its Input section whether the simulator kept up.

--ca DIR: against a broker that enforces fleet identity (`fleetwire broker-config`), each
device logs in with mutual TLS and a certificate of its own (CN = its id, issued by that
fleet CA at start, valid two days); --tls-ca is the CA of the broker's certificate when it
is not the fleet CA.

  fleetwire sim --devices 50 --broker localhost:8883 --ca ~/.fleetwire/ca
"""

import asyncio
import json
import sys

from fleetwire.tools import options


def add_arguments(p):
    p.add_argument("--devices", type=int, default=200, help="number of devices (default %(default)s)")
    options.add_broker(p)
    p.add_argument(
        "--period", type=int, default=60, help="reporting period, simulated seconds (default %(default)s)"
    )
    p.add_argument("--speed", type=float, default=1.0, help="simulated seconds per real second (default 1)")
    p.add_argument(
        "--duration",
        type=float,
        default=60,
        help="real seconds of reporting, then up to 15 s for the last acknowledgements (default %(default)s)",
    )
    p.add_argument("--seed", type=int, default=1, help="random seed (default %(default)s)")
    p.add_argument(
        "--boards",
        type=int,
        default=0,
        help="also run this many virtual boards (MicroPython), real time only (default 0)",
    )
    p.add_argument("--board-heap", default="128K", help="each virtual board's heap (default %(default)s)")
    p.add_argument("--board-dir", help="keep the boards' directories (console.log, flash) here")
    p.add_argument("--ca", metavar="DIR", help="fleet CA: every device gets its own certificate (mutual TLS)")
    p.add_argument(
        "--tls-ca",
        metavar="FILE",
        help="with --ca: the CA of the broker's certificate (default: the fleet CA)",
    )
    p.add_argument(
        "--updates",
        action="store_true",
        help="devices take releases over MQTT (fleetwire rollout) instead of the built-in rollout",
    )
    p.add_argument(
        "--release-keys",
        metavar="DIR",
        help="with --updates: the release-signing keys the devices trust, as deployed "
        "(default: $FLEETWIRE_RELEASE, else ~/.fleetwire/release)",
    )
    p.add_argument(
        "--bad-release",
        action="append",
        default=[],
        metavar="VERSION",
        help="a release that crashes more (repeat)",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=1,
        help="processes the devices are spread over, each its share (default %(default)s)",
    )
    p.add_argument(
        "--landing",
        metavar="DIR",
        help="the collector's landing zone: the simulator's own lag goes to DIR/_sim/ for the report",
    )
    p.add_argument("--quiet", action="store_true", help="no progress line")


def run(args):
    from fleetwire.host.fleet.sim import Simulator, progress_line

    host, port = args.broker
    if args.devices < 1 or args.period < 1 or args.speed <= 0 or args.duration <= 0:
        print(
            "fleetwire sim: need positive --devices, --period, --speed, --duration",
            file=sys.stderr,
        )
        return 2
    if not 1 <= args.workers <= args.devices:
        print("fleetwire sim: --workers: 1 to --devices (%d)" % args.devices, file=sys.stderr)
        return 2
    if args.boards < 0 or (args.boards and args.speed != 1):
        print(
            "fleetwire sim: --boards needs a count of 0 or more, and --speed 1: a virtual board runs on "
            "its own clock, in real time",
            file=sys.stderr,
        )
        return 2
    if args.boards:
        from fleetwire.host.rig.vboard import parse_heap

        try:
            parse_heap(args.board_heap)
        except ValueError as e:
            print("fleetwire sim: --board-heap: %s" % e, file=sys.stderr)
            return 2
    ca = None
    if args.ca or args.tls_ca:
        from fleetwire.host.identity import pki

        try:
            if not args.ca:
                raise pki.PKIError(
                    "--tls-ca goes with --ca (the fleet CA that issues the devices' certificates)"
                )
            ca = pki.FleetCA(args.ca)
            if args.tls_ca:
                pki.check_ca(pki.load_certificate(args.tls_ca, "--tls-ca"), "--tls-ca %s" % args.tls_ca)
        except pki.PKIError as e:
            print("fleetwire sim: %s" % e, file=sys.stderr)
            return 2
    keys = None
    if args.updates:
        from fleetwire.host.identity.signing import ReleaseKeys, SigningError, default_dir

        try:
            keys = ReleaseKeys(args.release_keys or default_dir()).key_set()
        except SigningError as e:
            print("fleetwire sim: --updates: %s" % e, file=sys.stderr)
            return 2
    kw = dict(
        devices=args.devices,
        period_s=args.period,
        speed=args.speed,
        duration=args.duration,
        seed=args.seed,
        progress=None if args.quiet else (lambda s: print(progress_line(s), end="", flush=True)),
        boards=args.boards,
        board_heap=args.board_heap,
        board_root=args.board_dir,
        ca=ca,
        tls_ca=args.tls_ca,
        ota=args.updates,
        bad=args.bad_release,
        release_keys=keys,
        **({"rollout": None} if args.updates else {}),
    )
    from fleetwire.host.rig.micropython import MicroPythonMissing
    from fleetwire.host.fleet.boards import BoardError
    from fleetwire.host.fleet.sim import FdLimitError
    from fleetwire.host.fleet.workers import Fleet, WorkerError

    try:
        if args.workers > 1:
            res = Fleet(host, port, workers=args.workers, **kw).run()
        else:
            res = asyncio.run(Simulator(host, port, **kw).run())
    except FdLimitError as e:
        print("fleetwire sim: %s" % e, file=sys.stderr)
        return 2
    except (BoardError, MicroPythonMissing, WorkerError) as e:
        print("\nfleetwire sim: %s" % e, file=sys.stderr)
        return 1
    print()
    print(json.dumps(res, indent=1))
    return report(res, args.landing)


def report(res, landing=None):
    """Say on stderr what a person must not miss (a dead worker, the simulator's lag) -> the exit status."""
    from fleetwire.host.fleet.lag import lag_words

    for w in res.get("per_worker", []):
        if w["status"] == "died":
            print(
                "fleetwire sim: worker %d (%d devices) died: %s; its stderr: %s"
                % (w["worker"], w["devices"], w["died"], w["stderr"] or "-"),
                file=sys.stderr,
            )
    words = lag_words(res["lag"])
    if words:
        print("fleetwire sim: %s" % words.strip("| "), file=sys.stderr)
    if landing:
        from fleetwire.host.fleet.lag import keep

        keep(res["lag"], landing)
    return 0 if res["errors"] == 0 and not res.get("workers_died") else 1

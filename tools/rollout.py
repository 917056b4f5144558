"""Roll a release out to a fleet over MQTT, in stages, with a gate between them: the Spark
report's release table for the devices already updated, against the release before.

  fleetwire rollout --broker localhost:8883 --tls-ca ca.pem --cert operator.pem --key operator.key \\
      --release-keys ~/.fleetwire/release --release app-1.5.0.fwb --devices fleet.txt \\
      --stages 5%,25%,100% --landing landing/ --soak 3600 --max-crash-free-drop 1 --rollback-on-halt

The release is an app bundle (`fleetwire bundle`) or an ESP32 app image (its version is
read from it). Devices: --devices FILE (one id a line, optionally a group after a comma, for
stages named by group: --stages canary,eu,*), --device ID (repeated) or --discover S (every
device heard on fleet/+/telemetry within S seconds). Boards take updates with "ota": true
in config.json (fleetwire.ota).

The offer is signed by the signing key of --release-keys DIR (`fleetwire release init`), and
so is an order back: a board takes only what a key it holds signed (`fleetwire deploy
--release-keys`).

While it runs it serves the release's chunks (fleet/<id>/ota_get -> fleet/<id>/ota/chunk),
shows each stage's progress from the boards' vitals, and lands their telemetry in --landing
(its own collector) for the gate's report. Exit codes: 0 rolled out, 3 halted (the reason and
the numbers are printed), 2 bad input, 1 failure (broker, report).
"""

import os
import sys

from fleetwire.tools import options


def add_arguments(p):
    options.add_broker(p, default=None)
    p.add_argument("--release", required=True, help="an app bundle (fleetwire bundle) or an ESP32 app image")
    p.add_argument("--version", help="the release's version (default: the one it names)")
    p.add_argument("--board", default="esp32", help="the board kind it is for (default %(default)s)")
    p.add_argument(
        "--release-keys",
        metavar="DIR",
        help="the release-signing keys that sign the offer and any order back (fleetwire release init; "
        "default: $FLEETWIRE_RELEASE, else ~/.fleetwire/release)",
    )
    p.add_argument(
        "--unsigned",
        action="store_true",
        help="offer it unsigned: only boards running a fleetwire from before signed releases take it",
    )
    p.add_argument(
        "--chunk",
        type=int,
        default=1024,
        help="most bytes per chunk (default %(default)s; a board asks for less when its max_packet needs it)",
    )
    g = p.add_argument_group("devices")
    g.add_argument("--devices", metavar="FILE", help="one device id a line, optionally ',group'")
    g.add_argument("--device", action="append", default=[], metavar="ID", help="a device (repeat)")
    g.add_argument(
        "--discover", type=float, metavar="S", help="every device heard on fleet/+/telemetry within S seconds"
    )
    p.add_argument(
        "--stages",
        default="5%,25%,100%",
        help="shares of the fleet (5%%,25%%,100%%) or groups (canary,eu,*) (default %(default)s)",
    )
    p.add_argument(
        "--stage-timeout", type=float, default=600, help="s a stage waits for its devices (default 600)"
    )
    p.add_argument(
        "--soak", type=float, default=600, help="s the updated devices run before the gate (default 600)"
    )
    g = p.add_argument_group("the gate")
    g.add_argument(
        "--landing",
        help="telemetry landing zone for the gate's report (a collector of this "
        "command lands in it, unless --no-collect)",
    )
    g.add_argument("--report-dir", help="where the gate's report goes (default LANDING/../rollout-report)")
    g.add_argument(
        "--symbols",
        metavar="DIR",
        help="a directory of release symbol maps (`fleetwire bundle` writes <bundle>.symbols.json): "
        "a halt names the crash's function and lines",
    )
    g.add_argument(
        "--no-collect",
        action="store_true",
        help="another collector lands the telemetry (whole "
        "files only: an hour's file appears when the hour is over)",
    )
    g.add_argument("--no-gate", action="store_true", help="no report between stages")
    g.add_argument("--baseline", help="the release to compare with (default: the one the devices run)")
    g.add_argument(
        "--max-crash-free-drop",
        type=float,
        default=2.0,
        help="percentage points of crash-free hours (default 2)",
    )
    g.add_argument(
        "--max-crash-free-devices-drop",
        type=float,
        default=None,
        help="percentage points of crash-free devices, from the boards' crash records (default: not checked)",
    )
    g.add_argument("--max-coverage-drop", type=float, default=0.05, help="mean coverage, 0..1 (default 0.05)")
    g.add_argument("--max-loss-rise", type=float, default=0.02, help="mean loss rate, 0..1 (default 0.02)")
    g.add_argument(
        "--min-device-hours",
        type=float,
        default=2,
        help="device-hours of the release needed to judge (default 2)",
    )
    g.add_argument(
        "--max-failed",
        type=float,
        default=20,
        metavar="PCT",
        help="rolled back + failed devices, %% of those offered, that halt (default 20)",
    )
    g.add_argument("--rollback-on-halt", action="store_true", help="order the updated devices back on a halt")
    options.add_login(p, "operator")


def _fail(msg):
    print("fleetwire rollout: %s" % msg, file=sys.stderr)
    return 2


def read_devices(path):
    """A devices file -> ([ids], {id: group})."""
    ids, groups = [], {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            dev, _, group = (x.strip() for x in line.partition(","))
            if not dev or "/" in dev or "+" in dev or "#" in dev:
                raise ValueError("%s line %d: %r is not a device id" % (path, n, dev))
            ids.append(dev)
            if group:
                groups[dev] = group
    return ids, groups


def run(args):
    from fleetwire.host.rollout import staged as ro
    from fleetwire.host.rollout.service import ServiceError, UpdateService
    from fleetwire.host.rollout.release import Release, ReleaseError

    host, port = args.broker
    why = options.login_problem(args)
    if why:
        return _fail(why)
    if not (args.devices or args.device or args.discover):
        return _fail("which devices? --devices FILE, --device ID or --discover S")
    if not args.no_gate and not args.landing:
        return _fail("the gate needs --landing (the telemetry its report reads), or --no-gate")
    for name in ("stage_timeout", "soak"):
        if getattr(args, name) < 0:
            return _fail("--%s must not be negative" % name.replace("_", "-"))
    try:
        rel = Release.from_file(args.release, args.version, args.board, args.chunk)
    except ReleaseError as e:
        return _fail(str(e))
    signer = None
    if not args.unsigned:
        from fleetwire.host.identity.signing import ReleaseKeys, SigningError, default_dir

        try:
            signer = ReleaseKeys(args.release_keys or default_dir()).signer()
        except SigningError as e:
            return _fail(str(e))
    ids, groups = [], {}
    try:
        if args.devices:
            ids, groups = read_devices(args.devices)
    except OSError as e:
        return _fail("cannot read --devices %s: %s" % (args.devices, e.strerror))
    except ValueError as e:
        return _fail(str(e))
    ids += args.device
    password = options.password() if args.user else None
    svc = UpdateService(
        host,
        port,
        client_id="fleetwire-rollout-%d" % os.getpid(),
        tls_ca=args.tls_ca,
        tls_cert=args.cert,
        tls_key=args.key,
        user=args.user,
        password=password,
        signer=signer,
    )
    collector = None
    try:
        svc.start()
        if args.discover:
            import time

            print("[rollout] listening %g s for devices on fleet/+/telemetry" % args.discover, flush=True)
            time.sleep(args.discover)
            ids += sorted(d for d in svc.devices if d not in ids)
        try:
            stages = ro.plan(args.stages, ids, rel, groups)
        except ro.RolloutError as e:
            return _fail(str(e))
        th = ro.Thresholds(
            args.max_crash_free_drop,
            args.max_coverage_drop,
            args.max_loss_rise,
            args.min_device_hours,
            args.max_failed,
            args.max_crash_free_devices_drop,
        )
        gate = None
        if not args.no_gate:
            if not args.no_collect:
                from fleetwire.host.fleet.collector import Collector

                collector = Collector(
                    host,
                    port,
                    args.landing,
                    "rollout-collector-%d" % os.getpid(),
                    tls_ca=args.tls_ca,
                    tls_cert=args.cert,
                    tls_key=args.key,
                    user=args.user,
                    password=password,
                ).start()
            out = args.report_dir or os.path.join(
                os.path.dirname(os.path.abspath(args.landing)), "rollout-report"
            )
            gate = ro.Gate(
                args.landing, out, th, seal=collector.close_all if collector else None, symbols=args.symbols
            )
        res = ro.Rollout(
            svc, rel, stages, gate, th, args.soak, args.stage_timeout, args.rollback_on_halt, args.baseline
        ).run()
    except ServiceError as e:
        print("fleetwire rollout: %s" % e, file=sys.stderr)
        return 1
    except RuntimeError as e:
        print("fleetwire rollout: %s" % e, file=sys.stderr)
        return 1
    finally:
        if collector is not None:
            collector.stop()
        svc.stop()
    return 0 if res.status == "done" else 3

"""The fleet demo, start to finish on this machine: a mosquitto on loopback that enforces
fleet identity (mutual TLS, a certificate per device from a fleet CA made for the run,
the ACL and CRL of `fleetwire broker-config`), the collector landing telemetry with its
own certificate, a simulated fleet (fleetwire's own client, vitals agent and updater on
every device; crashes, Wi-Fi drops, leaking heaps, draining batteries, devices going
silent) time-compressed, two staged rollouts over MQTT (`fleetwire rollout`), each release
signed by a release-signing key made for the run: release 1.5.0, which is bad (it crashes
more), halted by the gate (the Spark report's release table) after its first stage and its
devices ordered back; then 1.5.1, which is good, to 100 %; then a forged release, offered
with the operator's broker login but signed by another key, which every device refuses. Then
the Spark report, which shows the three releases. Prints the report's path and a fleet summary.
Everything it starts is stopped at the end, Ctrl-C included.

  fleetwire demo                                   # 200 devices, ~5 minutes
  fleetwire demo --devices 50 --duration 30 --out /tmp/fleet
  fleetwire demo --devices 10000                   # picks workers and compression, says which

A big fleet is spread over worker processes (fleetwire sim --workers), one per core at most, and
its time compressed no more than this machine keeps up with (fleetwire.host.fleet.plan): the
demo says what it chose before it starts, and the simulator's lag, if it fell behind anyway, is
in the report's Input section.
"""

import asyncio
import csv
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time


def add_arguments(p):
    p.add_argument("--devices", type=int, default=200, help="simulated devices (default %(default)s)")
    p.add_argument(
        "--duration",
        type=float,
        default=120,
        help="time compression: --hours simulated hours in this many real s (default %(default)s)",
    )
    p.add_argument(
        "--hours", type=float, default=4, help="simulated hours in --duration s (default %(default)s)"
    )
    p.add_argument(
        "--period", type=int, default=60, help="reporting period, simulated s (default %(default)s)"
    )
    p.add_argument(
        "--out", default="demo-out", help="where the landing zone and report go (default %(default)s)"
    )
    p.add_argument("--seed", type=int, default=1)
    p.add_argument(
        "--workers",
        type=int,
        default=None,
        help="simulator processes (default: picked from --devices and this machine's cores)",
    )
    p.add_argument("--stages", default="5%,25%,100%", help="the rollouts' stages (default %(default)s)")
    p.add_argument(
        "--soak",
        type=float,
        default=1.0,
        help="simulated hours a stage runs before the gate (default %(default)s)",
    )
    p.add_argument(
        "--max-crash-free-drop",
        type=float,
        default=10.0,
        help="the gate: percentage points of crash-free hours (default %(default)s)",
    )


# The story's releases: the fleet runs BASE; BAD crashes more (fleetwire.host.fleet.device.BAD); GOOD
# crashes less than BASE.
BASE, BAD, GOOD = "1.4.2", "1.5.0", "1.5.1"


def say(msg):
    print("[demo] %s" % msg, flush=True)


def ensure_mosquitto():
    from fleetwire.host.brokers.mosquitto import MosquittoMissing, find_mosquitto

    try:
        return find_mosquitto()
    except MosquittoMissing:
        pass
    apt = ["apt-get", "install", "-y", "-q", "mosquitto"]
    if os.geteuid() != 0:
        if not shutil.which("sudo"):
            return None
        apt = ["sudo"] + apt
    if not shutil.which("apt-get"):
        return None
    say("mosquitto is not installed; installing it: %s" % " ".join(apt))
    subprocess.run(apt, check=False)
    try:
        return find_mosquitto()
    except MosquittoMissing:
        return None


def run(args):
    from fleetwire.host.fleet.collector import Collector
    from fleetwire.host.brokers.mosquitto import Mosquitto
    from fleetwire.host.fleet import plan
    from fleetwire.host.fleet.sim import FdLimitError, Simulator, raise_fd_limit
    from fleetwire.host.fleet.workers import Fleet, WorkerError
    from fleetwire.host.identity.brokerconf import fd_needed

    if args.devices < 1 or args.duration <= 0 or args.hours <= 0 or args.period < 1:
        print("fleetwire demo: --devices, --duration, --hours and --period must be positive", file=sys.stderr)
        return 2
    if args.workers is not None and not 1 <= args.workers <= args.devices:
        print("fleetwire demo: --workers: 1 to --devices (%d)" % args.devices, file=sys.stderr)
        return 2
    if not ensure_mosquitto():
        print(
            "fleetwire demo: mosquitto is needed and could not be installed here; install it with\n"
            "    sudo apt-get install -y mosquitto\n(or bash tools/run.sh demo, which does)",
            file=sys.stderr,
        )
        return 2
    out = os.path.abspath(args.out)
    landing = os.path.join(out, "landing")
    report_dir = os.path.join(out, "report")
    for d in (landing, report_dir):
        shutil.rmtree(d, ignore_errors=True)
    # each release's symbol map, as `fleetwire bundle` writes one beside it: the gate's halt and
    # the report name a crash's function and lines
    from fleetwire.host.fleet import simapp

    for version in (BASE, BAD, GOOD):
        simapp.write_symbols(os.path.join(out, "symbols"), version, bad=version == BAD)
    chose = plan.choose(args.devices, args.period, args.hours * 3600 / args.duration, args.workers)
    try:
        raise_fd_limit(fd_needed(args.devices + 64), "the demo's broker")  # mosquitto inherits it
    except FdLimitError as e:
        print("fleetwire demo: %s" % e, file=sys.stderr)
        return 2
    speed = chose.speed
    for line in chose.words(args.hours):
        say(line)
    broker = collector = None
    t0 = time.monotonic()
    pki_dir = tempfile.mkdtemp(prefix="fleetwire-demo-pki-")  # a throwaway fleet CA, keys and all
    try:
        from fleetwire.host.identity.pki import FleetCA

        ca = FleetCA.create(os.path.join(pki_dir, "ca"), "fleetwire demo CA")
        from fleetwire.host.identity.signing import ReleaseKeys

        keys = ReleaseKeys.create(os.path.join(pki_dir, "release"))  # releases are signed with it
        broker = Mosquitto(max_queued=1000000, identity=ca).start()
        say("mosquitto on %s:%d" % broker.address)
        say(
            "the broker wants a certificate from every client (fleet CA %s): each device has its own, "
            "and may publish only under fleet/<its id>/" % ca.name
        )
        cert, key = ca.credentials("collector", "collector", os.path.join(pki_dir, "collector"))
        collector = Collector(
            broker.host,
            broker.port,
            landing,
            "demo-collector",
            tls_ca=ca.cert_path,
            tls_cert=cert,
            tls_key=key,
        ).start()
        say("collector (certificate CN collector) landing fleet/+/telemetry in %s" % landing)
        say(
            "simulating %d devices, %g simulated hours in %g s, a record every %d simulated s"
            % (args.devices, args.hours, args.duration, args.period)
        )
        make = Simulator if chose.workers == 1 else (lambda *a, **kw: Fleet(*a, workers=chose.workers, **kw))
        sim = make(
            broker.host,
            broker.port,
            devices=args.devices,
            period_s=args.period,
            speed=speed,
            duration=3600 * 24,
            seed=args.seed,
            ca=ca,
            rollout=None,
            ota=True,
            bad=[BAD],
            profiles={GOOD: {"crash_per_hour": 0.01, "boot_crash": 0.0}},
            progress=lambda s: None,
            release_keys=keys.key_set(),  # each device trusts the fleet's key, as deployed
        )
        box = {}

        def run_sim():
            try:
                box["res"] = asyncio.run(sim.run()) if chose.workers == 1 else sim.run()
            except (WorkerError, FdLimitError) as e:
                box["error"] = e

        thread = threading.Thread(target=run_sim, daemon=True)
        thread.start()
        # the certificates first: about 2 ms a device (bench/README.md), generous
        while not sim.started.wait(0.5):
            if not thread.is_alive():
                print("fleetwire demo: the simulator did not start: %s" % box.get("error"), file=sys.stderr)
                return 1
        cert, key = ca.credentials("operator", "operator", os.path.join(pki_dir, "operator"))
        say("every device holds release-signing key %s: it takes only what that key signed" % keys.signing_id)
        outcomes = rollouts(args, sim, broker, ca, cert, key, collector, out, speed, keys)
        sim.stop_after(0.25 * 3600 / speed)  # a quarter of an hour more, then the run ends
        thread.join()
        res = box["res"]
        print(flush=True)
        time.sleep(1.0)  # the last acknowledged records reach the collector
        collector.stop()
        say(
            "fleet: %d records sent, %d acknowledged, %d boots (%d crashes), %d Wi-Fi drops, %d errors"
            % (res["sent"], res["acked"], res["boots"], res["crashes"], res["wifi_drops"], res["errors"])
        )
        for w in res.get("per_worker", []):
            say(
                "  worker %d: %d devices, %d sent, %d acknowledged, %s"
                % (w["worker"], w["devices"], w["sent"], w["acked"], w.get("died") or w["status"])
            )
        from fleetwire.host.fleet.lag import describe, keep

        keep(res["lag"], landing)  # the report's Input section says whether the simulator kept up
        for line in describe(res["lag"]):
            say("simulator: " + line.strip())
        say(
            "collector: %d received, %d landed, %d quarantined, %d files"
            % (collector.received, collector.landed, collector.quarantined, collector.files)
        )
        collector = None
        broker.stop()
        broker = None
        say("running the Spark report (local[2]) ...")
        from fleetwire.tools import report

        rc = report.main(["--input", landing, "--out", report_dir, "--symbols", os.path.join(out, "symbols")])
        if rc:
            return rc
        summary(report_dir)
        for line in outcomes:
            say(line)
        say("report: %s" % os.path.join(report_dir, "report.html"))
        say("done in %.0f s" % (time.monotonic() - t0))
        return 0
    except KeyboardInterrupt:
        print()
        say("interrupted: stopping everything")
        return 130
    finally:
        if collector is not None:
            collector.stop()
        if broker is not None:
            broker.close()
        shutil.rmtree(pki_dir, ignore_errors=True)


def rollouts(args, sim, broker, ca, cert, key, collector, out, speed, keys):
    """The story: a while on BASE, the bad release halted by the gate (its devices ordered
    back), the good one to 100 %, then a forged release that every device refuses -> lines
    that say how each ended."""
    from fleetwire.host.fleet import simapp
    from fleetwire.host.rollout import staged as ro
    from fleetwire.host.rollout.service import UpdateService
    from fleetwire.host.rollout.release import Release, pack

    svc = UpdateService(
        broker.host,
        broker.port,
        client_id="demo-rollout",
        tls_ca=ca.cert_path,
        tls_cert=cert,
        tls_key=key,
        signer=keys.signer(),
    ).start()
    outcomes = []
    try:
        hour = 3600 / speed
        say("the fleet runs %s for a simulated hour first" % BASE)
        time.sleep(hour)
        ids = ["sim-%04d" % i for i in range(args.devices)]
        th = ro.Thresholds(max_crash_free_drop=args.max_crash_free_drop, max_failed_pct=50.0)
        symbols = os.path.join(out, "symbols")
        gate = ro.Gate(
            os.path.join(out, "landing"),
            os.path.join(out, "gate-report"),
            th,
            seal=collector.close_all,
            symbols=symbols,
        )
        for version, what in ((BAD, "bad: it crashes more"), (GOOD, "good")):
            files = {n: t.encode() for n, t in simapp.sources(version, bad=version == BAD).items()}
            files[".fwversion"] = version.encode()
            rel = Release.from_bytes(pack(files))
            say(
                "rolling out %s (%s), stages %s, soaking %g simulated hours before each gate"
                % (version, what, args.stages, args.soak)
            )
            r = ro.Rollout(
                svc,
                rel,
                ro.plan(args.stages, ids, rel),
                gate,
                th,
                soak_s=args.soak * hour,
                stage_timeout_s=max(30.0, hour),
                rollback_on_halt=True,
                baseline=BASE,
                out=sys.stdout,
                poll_s=0.5,
            ).run()
            if r.status == "halted":
                outcomes.append(
                    "rollout of %s: HALTED after stage %d: %s; %d devices ordered back to %s"
                    % (version, r.stage, r.reason, len(r.rolled_back), BASE)
                )
                time.sleep(0.5 * hour)  # they go back
            else:
                outcomes.append(
                    "rollout of %s: done, on %d of %d devices (%d rolled back)"
                    % (version, r.counts["confirmed"], args.devices, r.counts["rolled back"])
                )
        outcomes.append(forged(sim, broker, ca, cert, key, ids, hour))
        say("releases now: %s" % ", ".join("%s on %d" % kv for kv in sorted(sim.versions().items())))
    finally:
        svc.stop()
    return outcomes


FORGED = "6.6.6"


def forged(sim, broker, ca, cert, key, ids, hour):
    """Someone with the operator's broker login, but not the release-signing key, offers every
    device a release signed by a key of their own -> the line that says what the devices did
    (those gone silent in the story cannot answer)."""
    from fleetwire.host.identity.signing import Signer, new_key
    from fleetwire.host.rollout.release import Release, pack
    from fleetwire.host.rollout.service import UpdateService

    rel = Release.from_bytes(pack({"app.py": b"print('pwned')\n", ".fwversion": FORGED.encode()}))
    svc = UpdateService(
        broker.host,
        broker.port,
        client_id="demo-forger",
        tls_ca=ca.cert_path,
        tls_cert=cert,
        tls_key=key,
        signer=Signer(new_key(2048)),
    ).start()
    try:
        say(
            "a forger with the operator's broker login offers %s, signed by a key of its own, to all" % FORGED
        )
        svc.offer(ids, rel)
        silent = set(sim.silent())
        live = [d for d in ids if d not in silent]

        def answered(devs):
            return all(d in devs and devs[d].ota.get("version") == FORGED for d in live)

        svc.wait(answered, max(30.0, 2 * hour))
        said = [svc.devices[d].ota for d in live if d in svc.devices]
        no = sum(1 for o in said if o.get("version") == FORGED and o.get("state") == "refused")
        codes = sorted({str(o.get("code")) for o in said if o.get("version") == FORGED})
        took = sum(1 for d in ids if d in svc.devices and svc.devices[d].fw_version == FORGED)
        return "forged release %s: refused by %d of %d devices (code %s), run by %d (%d silent)" % (
            FORGED,
            no,
            len(live),
            ", ".join(codes) or "-",
            took,
            len(silent),
        )
    finally:
        svc.withdraw(ids)
        svc.stop()


def _rows(path):
    try:
        with open(path, newline="") as f:
            return list(csv.DictReader(f))
    except OSError:
        return []


def _f(v, fmt="%.1f"):
    try:
        return fmt % float(v)
    except (TypeError, ValueError):
        return "-"


# The summary's columns: heading, width, firmware_cohort's column and its format.
SUMMARY = [
    ("firmware", -10, "fw_version", None),
    ("devices", 8, "devices", None),
    ("crash-free h %", 14, "crash_free_hours_pct", "%.1f"),
    ("RSSI p50", 10, "rssi_p50", "%.0f"),
    ("latency p50 ms", 14, "latency_p50", "%.0f"),
    ("coverage", 10, "mean_coverage", "%.3f"),
    ("loss", 10, "mean_loss_rate", "%.4f"),
]


def summary(report_dir):
    csv_dir = os.path.join(report_dir, "csv")
    cohorts = _rows(os.path.join(csv_dir, "firmware_cohort.csv"))
    health = _rows(os.path.join(csv_dir, "device_health.csv"))
    # a column no release has a figure for is left out: latency, in compressed time (the
    # simulator's devices report none: fleetwire.host.fleet.device)
    cols = SUMMARY[:1] + [c for c in SUMMARY[1:] if any(r.get(c[2]) for r in cohorts)]
    line = " ".join("%%%ds" % width for _, width, _, _ in cols)
    print()
    print("  " + line % tuple(head for head, _, _, _ in cols))
    for r in cohorts:
        print("  " + line % tuple(_f(r.get(c), fmt) if fmt else r.get(c) for _, _, c, fmt in cols))
    if "latency_p50" not in [c for _, _, c, _ in cols]:
        print("  (no publish latency: in compressed time the simulated devices measure none)")
    if health:
        silent = sum(1 for r in health if str(r.get("silent")).lower() in ("true", "1"))
        crashed = sum(1 for r in health if _num(r.get("unexpected_resets")) > 0)
        leaking = sum(1 for r in health if _num(r.get("heap_leak_bytes_per_hour")) > 200)
        print()
        print(
            "  devices: %d, silent: %d, with unexpected resets: %d, leaking heap (>200 B/h): %d"
            % (len(health), silent, crashed, leaking)
        )
    print()


def _num(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return 0.0

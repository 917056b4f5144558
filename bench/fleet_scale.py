"""Fleet at scale: N simulated devices over W worker processes (`fleetwire sim --workers`), each
with a certificate of its own and mutual TLS, against a mosquitto that enforces fleet identity,
and one collector (`fleetwire collect`, its own process) landing their records. Half-way through
the broker is restarted: the connect storm is the time from the broker listening again until
every device is connected (each with its backoff's jitter). Prints one row of the table in
bench/README.md ("Fleet at scale") and the run's figures as JSON.

    .venv/bin/python bench/fleet_scale.py --devices 1000 --workers 2 --period 60 --duration 180
    .venv/bin/python bench/fleet_scale.py --devices 10000 --workers 2 --period 60 --duration 600

- devices per core: the devices over the simulator's CPU (its workers' user + system time over
  the wall time), at this period and speed;
- records/s: records sent over the reporting time; coverage: distinct records landed over those
  a device makes in the reporting time at its period (silent devices are left out of the story);
- collector and mosquitto: CPU (share of a core) and peak resident memory (VmHWM).
"""

import argparse
import glob
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from fleetwire.host.brokers.mosquitto import Mosquitto  # noqa: E402
from fleetwire.host.fleet.sim import raise_fd_limit  # noqa: E402
from fleetwire.host.fleet.workers import Fleet  # noqa: E402
from fleetwire.host.identity.brokerconf import fd_needed  # noqa: E402
from fleetwire.host.identity.pki import FleetCA  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            parts = f.read().rsplit(")", 1)[1].split()
        return (int(parts[11]) + int(parts[12])) / TICK  # utime, stime
    except OSError:
        return None


def hwm_kb(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        return None


class Sampler(threading.Thread):
    """The last CPU time and peak memory seen of each process (workers exit at the end)."""

    def __init__(self):
        super().__init__(daemon=True)
        self.pids = {}  # name -> pid
        self.first, self.last, self.hwm = {}, {}, {}
        self.stop = threading.Event()

    def run(self):
        while not self.stop.wait(1.0):
            self.sample()

    def sample(self):
        for name, pid in list(self.pids.items()):
            c, m = cpu_s(pid), hwm_kb(pid)
            if c is not None:
                self.first.setdefault(name, c)
                self.last[name] = c
            if m is not None:
                self.hwm[name] = max(self.hwm.get(name, 0), m)

    def used(self, name):
        return self.last.get(name, 0) - self.first.get(name, 0)


def landed(land):
    """The distinct (device, seq) in the landing zone, the files being written included."""
    seen = set()
    for path in glob.glob(os.path.join(land, "date=*", "hour=*", "*")):
        with open(path) as f:
            for line in f:
                if line.endswith("\n"):  # a file being written may end in half a line
                    r = json.loads(line)
                    seen.add((r["device_id"], r["seq"]))
    return seen


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--devices", type=int, default=1000)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--period", type=int, default=60)
    p.add_argument("--speed", type=float, default=1.0)
    p.add_argument("--duration", type=float, default=180, help="real seconds of reporting")
    p.add_argument("--no-storm", action="store_true", help="do not restart the broker half-way")
    a = p.parse_args()
    raise_fd_limit(fd_needed(a.devices + 256), "mosquitto")  # it inherits this process's limit
    tmp = tempfile.mkdtemp(prefix="fleetwire-bench-scale-")
    ca = FleetCA.create(os.path.join(tmp, "ca"), "bench CA")
    broker = Mosquitto(max_queued=1000000, identity=ca).start()
    land = os.path.join(tmp, "landing")
    cert, key = ca.credentials("collector", "collector", os.path.join(tmp, "collector"))
    coll = subprocess.Popen(
        [sys.executable, "-m", "fleetwire.tools.cli", "collect", "--broker", "127.0.0.1:%d" % broker.port]
        + ["--landing", land, "--id", "bench", "--tls-ca", ca.cert_path, "--cert", cert, "--key", key],
        stdout=subprocess.PIPE,
        text=True,
    )
    coll.stdout.readline()
    s = Sampler()
    s.pids.update(mosquitto=broker.proc.pid, collector=coll.pid)
    fleet = Fleet(
        broker.host,
        broker.port,
        devices=a.devices,
        workers=a.workers,
        period_s=a.period,
        speed=a.speed,
        duration=a.duration,
        seed=7,
        ca=ca,
        silent_share=0,
    )
    storm = {}

    def watch():
        fleet.started.wait()
        t_started = time.monotonic()
        for w in fleet.workers:
            s.pids["worker-%d" % w.i] = w.proc.pid
        s.sample()
        s.start()
        # everyone connected first (the first storm: a fleet switched on at once)
        while fleet.connected() < a.devices and time.monotonic() < fleet.clock.t0 + a.duration:
            time.sleep(0.2)
        storm["first_s"] = round(time.monotonic() - t_started, 1)
        if a.no_storm:
            return
        time.sleep(max(0.0, fleet.clock.t0 + a.duration / 2 - time.monotonic()))
        broker.stop()
        s.pids.pop("mosquitto", None)
        broker.start()
        s.pids["mosquitto-2"] = broker.proc.pid
        t_up = time.monotonic()
        time.sleep(1.5)  # the workers' status (each second) has seen the drop
        while fleet.connected() < a.devices and time.monotonic() < t_up + a.duration:
            time.sleep(0.2)
        storm["restart_s"] = round(time.monotonic() - t_up, 1)

    threading.Thread(target=watch, daemon=True).start()
    t0 = time.monotonic()
    res = fleet.run()
    wall = time.monotonic() - t0
    # the records the broker acknowledged reach the collector (it may be behind): up to a minute
    deadline = time.monotonic() + 60
    while len(landed(land)) < res["acked"] and time.monotonic() < deadline:
        time.sleep(1)
    s.sample()
    s.stop.set()
    coll.send_signal(signal.SIGTERM)
    coll.communicate(timeout=60)
    broker.stop()
    seen = landed(land)
    schedule = a.devices * a.duration * a.speed / a.period
    sim_cpu = sum(s.used(n) for n in s.last if n.startswith("worker-"))
    run_s = a.duration  # the reporting time; the workers also start (certificates) and drain
    out = {
        "devices": a.devices,
        "workers": a.workers,
        "period_s": a.period,
        "speed": a.speed,
        "duration_s": a.duration,
        "wall_s": round(wall, 1),
        "sent": res["sent"],
        "acked": res["acked"],
        "landed_distinct": len(seen),
        "every_acked_landed": len(seen) >= res["acked"],
        "records_per_s": round(res["sent"] / run_s, 1),
        "coverage": round(len(seen) / schedule, 4),
        "sim_cpu_cores": round(sim_cpu / run_s, 3),
        "devices_per_core": round(a.devices / (sim_cpu / run_s)) if sim_cpu else None,
        "storm": storm,
        "collector_cpu_cores": round(s.used("collector") / run_s, 3),
        "collector_peak_mb": round(s.hwm.get("collector", 0) / 1024, 1),
        "mosquitto_cpu_cores": round((s.used("mosquitto") + s.used("mosquitto-2")) / run_s, 3),
        "mosquitto_peak_mb": round(max(s.hwm.get("mosquitto", 0), s.hwm.get("mosquitto-2", 0)) / 1024, 1),
        "worker_peak_mb": round(
            max((v for k, v in s.hwm.items() if k.startswith("worker-")), default=0) / 1024, 1
        ),
        "lag": {k: v for k, v in res["lag"].items() if k != "hist"},
        "errors": res["errors"],
        "last_error": res["last_error"],
        "workers_died": res["workers_died"],
        "load_average": os.getloadavg(),  # the machine's, others' work included: a loaded run is no figure
    }
    print(json.dumps(out, indent=1))
    print(
        "| %d | %d | %d s, %gx | %.0f | %.4f | %s | %s | %s s | %s s | %.2f, %.0f MB | %.2f, %.0f MB | %s |"
        % (
            a.devices,
            a.workers,
            a.period,
            a.speed,
            out["records_per_s"],
            out["coverage"],
            "yes" if out["every_acked_landed"] else "NO",
            out["devices_per_core"],
            storm.get("first_s", "-"),
            storm.get("restart_s", "-"),
            out["collector_cpu_cores"],
            out["collector_peak_mb"],
            out["mosquitto_cpu_cores"],
            out["mosquitto_peak_mb"],
            "%d missed, p95 %.2g s" % (out["lag"]["missed_periods"], out["lag"]["late_p95_s"]),
        )
    )
    import shutil

    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

"""The simulator over several processes (`fleetwire sim --workers N`,
fleetwire.host.fleet.workers): each device is the same device in any worker, the summary adds
up every worker's counts, every acknowledged record lands, and a worker that dies is reported
with its counts kept, never silently missing."""

import collections
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time

from fleetwire.host.fleet.collector import Collector
from fleetwire.host.fleet.sim import Simulator
from fleetwire.host.fleet.workers import COUNTS, Fleet, share
from fleetwire.tools import sim as sim_cli
from fleet_helpers import landed, until


def test_each_device_runs_in_exactly_one_worker_always_the_same_one():
    for devices, workers in ((200, 2), (10000, 3), (7, 7)):
        shares = [share(i, devices, workers) for i in range(workers)]
        assert sorted(d for s in shares for d in s) == list(range(devices))
        assert shares == [share(i, devices, workers) for i in range(workers)]  # deterministic


def test_a_device_draws_the_same_story_whichever_worker_runs_it():
    from fleetwire.host.fleet.device import SimDevice

    def story(only):
        sim = Simulator("127.0.0.1", 1, devices=10, seed=4, only=only)
        d = SimDevice(sim, 7, random.Random("%s/%d" % (sim.seed, 7)))
        return d.id, d.rssi0, d.vbat0, d.heap0, d.silent_at, d.rank

    assert story([7]) == story(range(10)) == story([1, 4, 7])
    assert story([7])[0] == "sim-0007"


def test_200_devices_over_2_workers_with_their_own_certificates_land_every_acknowledged_record(
    fresh_mosquitto, fleet_ca, host_credentials, tmp_path
):
    b = fresh_mosquitto(identity=fleet_ca, max_queued=100000)
    land = str(tmp_path / "landing")
    cert, key = host_credentials("collector", "collector")
    with Collector(b.host, b.port, land, "workers-test", tls_ca=b.ca_pem, tls_cert=cert, tls_key=key) as c:
        res = Fleet(
            b.host,
            b.port,
            devices=200,
            workers=2,
            period_s=60,
            speed=60,
            duration=20,
            seed=2,
            ca=fleet_ca,
            silent_share=0,
        ).run()
        until(lambda: c.landed >= res["records_acked"], 600)  # a loaded machine's collector may be behind
    # no worker died; a device's trouble (on a starved machine a TLS connect that timed out, then
    # retried) is counted in errors, never the fleet's end: every device still reports, below
    assert res["workers_died"] == [], res
    per = res["per_worker"]
    assert [w["devices"] for w in per] == [100, 100] and all(w["status"] == "done" for w in per)
    for k in COUNTS:  # the totals are the workers' counts added up
        assert res[k] == sum(w[k] for w in per), k
    assert all(w["sent"] > 0 and w["boots"] >= 100 for w in per)
    recs = landed(land)
    by_dev = collections.defaultdict(set)
    for r in recs:
        by_dev[r["device_id"]].add(r["seq"])
    assert set(by_dev) == {"sim-%04d" % i for i in range(200)}  # every device, from both workers
    # every acknowledged record landed: "records_acked" counts the telemetry records the broker
    # acknowledged, each once ("acked" counts every PUBACK: crash records too, and a record sent
    # again from the store after a reboot, acknowledged twice)
    assert res["records_acked"] > 0 and sum(len(s) for s in by_dev.values()) >= res["records_acked"]
    gaps = {d: sorted(set(range(1, max(s) + 1)) - s) for d, s in by_dev.items() if len(s) != max(s)}
    assert not gaps, gaps
    log = b.log_text()
    assert "u'sim-0000'" in log and "u'sim-0199'" in log  # each by its own certificate
    assert "lag" in res and res["lag"]["records_due"] >= res["sent"]


def test_a_worker_that_dies_is_reported_and_its_counts_stay_in_the_totals(fresh_mosquitto, capsys):
    b = fresh_mosquitto(max_queued=100000)
    fleet = Fleet(b.host, b.port, devices=40, workers=2, period_s=60, speed=120, duration=12, seed=3)

    def kill_worker_1():
        fleet.started.wait(60)
        while fleet.workers[1].status.get("sent", 0) < 20:  # it has counted something
            time.sleep(0.1)
        os.kill(fleet.workers[1].proc.pid, signal.SIGKILL)

    threading.Thread(target=kill_worker_1, daemon=True).start()
    res = fleet.run()
    assert res["workers_died"] == [1]
    dead, alive = res["per_worker"][1], res["per_worker"][0]
    assert alive["status"] == "done" and dead["status"] == "died"
    assert "killed by SIGKILL" in dead["died"] and "last report" in dead["died"]
    assert dead["sent"] >= 20 and res["sent"] == alive["sent"] + dead["sent"]  # not missing from the totals
    # the command says so on stderr and fails
    assert sim_cli.report(res) == 1
    err = capsys.readouterr().err
    assert "worker 1 (20 devices) died: killed by SIGKILL" in err


def test_the_command_line_spreads_devices_over_workers(fresh_mosquitto):
    b = fresh_mosquitto()
    cmd = [sys.executable, "-m", "fleetwire.tools.cli", "sim", "--broker", "127.0.0.1:%d" % b.port]
    r = subprocess.run(
        cmd + ["--devices", "6", "--workers", "2", "--period", "1", "--duration", "3", "--quiet"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout[r.stdout.index("{") :])
    assert res["workers"] == 2 and [w["devices"] for w in res["per_worker"]] == [3, 3]
    assert res["sent"] >= 6 and res["errors"] == 0
    r = subprocess.run(cmd + ["--devices", "2", "--workers", "3"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--workers: 1 to --devices (2)" in r.stderr

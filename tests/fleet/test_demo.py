"""The main job, `fleetwire demo`, end to end at a small size: broker, collector,
simulated fleet, Spark report, summary; nothing left running afterwards."""

import os
import re
import subprocess
import sys

from fleetwire.host.fleet import simapp
from fleetwire.host.rig import symbols

# where the bad release's own crash is, by its source: "average (app.py:13-17)"
_AVG = [f for f in symbols.functions(simapp.sources("1.5.0", bad=True)["app.py"]) if f[1] == "average"][0]
NEW_CRASH = "ZeroDivisionError in average (app.py:%d-%d)" % (_AVG[2], _AVG[3])


def test_the_demo_runs_the_whole_pipeline_and_cleans_up(tmp_path, java):
    # the story at a small size: 40 devices, 2 simulated hours in 10 s, over 2 simulator processes;
    # the gate between the stages is the Spark report's release table, so this is the end-to-end
    # run of the gate
    out = tmp_path / "demo"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "fleetwire.tools.cli",
            "demo",
            "--devices",
            "40",
            "--duration",
            "10",
            "--hours",
            "2",
            "--stages",
            "25%,100%",
            "--soak",
            "1.5",
            "--workers",
            "2",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert (out / "report" / "report.html").exists()
    assert "report: %s" % (out / "report" / "report.html") in r.stdout
    # the bad release is halted by the gate after its first stage, with the numbers, and its
    # devices are ordered back; the good one goes to every device
    halted = [
        x for x in r.stdout.splitlines() if x.startswith("[demo] rollout of 1.5.0: HALTED after stage 1: ")
    ]
    back = re.search(r"; (\d+) devices ordered back to 1\.4\.2$", halted[0]) if halted else None
    first = r.stdout.split("rolling out 1.5.0", 1)[-1].split("rolling out 1.5.1", 1)[0]
    said = "\n".join(x for x in first.splitlines() if not x.startswith("stage "))  # the 1.5.0 rollout
    assert back and "crash-free hours" in halted[0] and "on 1.5.0 against" in halted[0], said[-3000:]
    # and names the crash the bad release brought, from the boards' crash records, at the lines
    # its release's symbol map gives (the boards' -O3 tracebacks say line 1)
    assert "; top new crash %s, " % NEW_CRASH in halted[0], halted[0]
    # the first stage is 10 devices; one that the bad release crashed in its trial is back on
    # 1.4.2 by itself (its bootloader), so the gate orders back the others
    assert 1 <= int(back.group(1)) <= 10, halted[0]
    assert "[demo] rollout of 1.5.1: done, on 40 of 40 devices" in r.stdout, r.stdout[-3000:]
    # what it chose, and how the simulator kept up (said, and in the report's Input section)
    assert "[demo] 40 devices in 2 simulator processes, up to 20 each" in r.stdout
    assert "[demo] time compressed 720x: 480 records/s" in r.stdout
    assert "[demo]   worker 1: 20 devices" in r.stdout and "[demo] simulator: the simulator " in r.stdout
    assert "[demo] releases now: 1.5.1 on 40\n" in r.stdout, r.stdout[-3000:]  # none left on 1.5.0
    # the releases were signed; a forger with the operator's broker login but another key offered
    # 6.6.6 to every device, and every device that still reports refused it
    forged = re.search(
        r"\[demo\] forged release 6\.6\.6: refused by (\d+) of (\d+) devices \(code key\), "
        r"run by 0 \((\d+) silent\)",
        r.stdout,
    )
    assert forged, r.stdout[-3000:]
    refused, live, silent = (int(x) for x in forged.groups())
    assert refused == live == 40 - silent and silent <= 4, forged.group(0)
    assert "[rollout] gate after stage 1: passed" in r.stdout
    # the report's release table shows all three, the bad one worse than the others
    import csv

    rows = {x["fw_version"]: x for x in csv.DictReader(open(out / "report" / "csv" / "firmware_cohort.csv"))}
    assert set(rows) == {"1.4.2", "1.5.0", "1.5.1"}
    cfh = {v: float(x["crash_free_hours_pct"]) for v, x in rows.items()}
    assert cfh["1.5.0"] < cfh["1.4.2"] and cfh["1.5.0"] < cfh["1.5.1"]
    assert "firmware" in r.stdout and "1.5.1" in r.stdout  # the summary table
    # in compressed time the devices measure no latency, and nothing shows one: not the table,
    # not its CSV copy, not the summary
    assert all(x["latency_p50"] == x["latency_p95"] == "" for x in rows.values())
    page = (out / "report" / "report.html").read_text()
    assert "the simulator kept its schedule" in page or "the simulator fell behind" in page
    assert "title='latency_p50'" not in page and "Publish latency is left out" in page
    assert "<code>%s</code>" % NEW_CRASH in page  # under "Why boards crash"
    head = [x for x in r.stdout.splitlines() if x.split()[:2] == ["firmware", "devices"]]
    assert head and "latency" not in head[0], head
    assert "(no publish latency: in compressed time the simulated devices measure none)" in r.stdout
    landed = [os.path.join(d, f) for d, _, fs in os.walk(out / "landing") for f in fs]
    crashes = [f for f in landed if os.path.basename(os.path.dirname(f)) == "_crashes"]
    assert crashes and all(f.endswith(".json") for f in crashes)  # one file a crash record
    lag = [f for f in landed if os.path.basename(os.path.dirname(f)) == "_sim"]
    assert len(lag) == 1 and lag[0].endswith(".json")  # the simulator's own lag, for the report
    landed = [f for f in landed if f not in crashes and f not in lag]
    assert landed and all(f.endswith(".ndjson") for f in landed)  # whole files only
    # the devices' own records say so, as the collector landed them
    import json

    said = {}
    for path in landed:
        for line in open(path):
            rec = json.loads(line)
            ota = rec.get("ota") or {}
            if ota.get("version") == "6.6.6":
                said[rec["device_id"]] = (ota["state"], ota["code"])
            assert rec.get("fw_version") != "6.6.6", rec
    assert len(said) >= refused and set(said.values()) == {("refused", "key")}, said
    from fleetwire.host.brokers.mosquitto import accepts

    port = int(r.stdout.split("mosquitto on ")[1].split()[0].rsplit(":", 1)[1])
    assert not accepts("127.0.0.1", port), "the demo's mosquitto is still running"


def test_ctrl_c_stops_everything_the_demo_started(tmp_path, java):
    import signal
    import time

    out = tmp_path / "demo-int"
    p = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "fleetwire.tools.cli",
            "demo",
            "--devices",
            "5",
            "--duration",
            "60",
            "--out",
            str(out),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    port = None
    for line in p.stdout:
        if "mosquitto on" in line:
            port = int(line.rsplit(":", 1)[1])
        if "simulating" in line:
            break
    time.sleep(2)
    p.send_signal(signal.SIGINT)
    out_text, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    assert "interrupted: stopping everything" in out_text
    from fleetwire.host.brokers.mosquitto import accepts

    assert port and not accepts("127.0.0.1", port), "the demo's mosquitto is still running"

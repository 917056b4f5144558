"""The main job, `fleetwire demo`, end to end at a small size: broker, collector,
simulated fleet, Spark report, summary; nothing left running afterwards."""
import os
import subprocess
import sys


def test_the_demo_runs_the_whole_pipeline_and_cleans_up(tmp_path):
    out = tmp_path / "demo"
    r = subprocess.run([sys.executable, "-m", "fleetwire.tools.cli", "demo", "--devices", "12", "--duration", "8",
                        "--hours", "1", "--out", str(out)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert (out / "report" / "report.html").exists()
    assert "report: %s" % (out / "report" / "report.html") in r.stdout
    assert "firmware" in r.stdout and "1.4.2" in r.stdout  # the summary table
    landed = [f for d, _, fs in os.walk(out / "landing") for f in fs]
    assert landed and all(f.endswith(".ndjson") for f in landed)  # whole files only
    from fleetwire.host.mosquitto import accepts
    port = int(r.stdout.split("mosquitto on ")[1].split()[0].rsplit(":", 1)[1])
    assert not accepts("127.0.0.1", port), "the demo's mosquitto is still running"


def test_ctrl_c_stops_everything_the_demo_started(tmp_path):
    import signal
    import time
    out = tmp_path / "demo-int"
    p = subprocess.Popen([sys.executable, "-m", "fleetwire.tools.cli", "demo", "--devices", "5", "--duration",
                          "60", "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
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
    from fleetwire.host.mosquitto import accepts
    assert port and not accepts("127.0.0.1", port), "the demo's mosquitto is still running"

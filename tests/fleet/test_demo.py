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
    ps = subprocess.run(["pgrep", "-f", str(out)], capture_output=True, text=True)
    assert ps.stdout.strip() == "", "left running: %s" % ps.stdout

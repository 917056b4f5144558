"""Commands and desired state in the fleet report: what the operator sent and each board's answer
(LANDING/_commands/, landed by the operator and the collector) become the commands table, per
release and command; each change of desired state becomes a row of the convergence table: how
long its boards took to report it. report.html shows both."""

import json

import pandas as pd
import pytest

from fleetwire.host.analytics import generator, job

pytestmark = pytest.mark.spark

T0 = 1_700_000_000_000


def land(root, writer, events):
    """events: [(ms after T0, device, kind, body)] as one writer's file of LANDING/_commands/."""
    d = root / "_commands" / "date=2023-11-14"
    d.mkdir(parents=True, exist_ok=True)
    with open(d / ("%s.ndjson" % writer), "a") as f:
        for ms, dev, kind, body in events:
            f.write(json.dumps({"rx_ts": T0 + ms, "device_id": dev, "kind": kind, "body": body}) + "\n")


def read(out, name):
    return pd.read_parquet(str(out / name)).to_dict("records")


def test_sent_commands_and_answers_become_counts_and_latency_per_release_and_convergence_per_change(
    spark, tmp_path
):
    root = tmp_path / "landing"
    df = generator.generate(devices=4, hours=1, seed=3)
    generator.write_landing(df, str(root))
    devs = sorted(df["device_id"].unique())
    fw = dict(df.sort_values("rx_ts").groupby("device_id")["fw_version"].last())
    # the operator: "ping" to all four, "sample" to two; a change of desired state for three
    sent = [(0, d, "sent", {"id": "p%d" % i, "name": "ping", "deadline": None}) for i, d in enumerate(devs)]
    sent += [
        (0, d, "sent", {"id": "s%d" % i, "name": "sample", "deadline": None}) for i, d in enumerate(devs[:2])
    ]
    sent += [(0, d, "desired", {"version": 5, "change": "c1"}) for d in devs[:3]]
    land(root, "op-1", sent)
    # the collector: three pings answered (one twice: the first counts), one left unanswered;
    # a sample expired and one failed; two boards report version 5, one only an older version
    land(
        root,
        "collector-1",
        [
            (1000, devs[0], "answer", {"id": "p0", "status": "ok"}),
            (3000, devs[1], "answer", {"id": "p1", "status": "ok"}),
            (5000, devs[2], "answer", {"id": "p2", "status": "ok"}),
            (9000, devs[2], "answer", {"id": "p2", "status": "ok"}),
            (2000, devs[0], "answer", {"id": "s0", "status": "expired"}),
            (2000, devs[1], "answer", {"id": "s1", "status": "error"}),
            (-5000, devs[0], "reported", {"version": 5}),  # before the change: not its report
            (4000, devs[0], "reported", {"version": 5}),
            (8000, devs[1], "reported", {"version": 6}),
            (8000, devs[2], "reported", {"version": 4}),
        ],
    )
    out = tmp_path / "out"
    job.run(spark, job.Config(input=str(root), out=str(out), log=lambda m: None))
    rows = {(r["name"], r["fw_version"]): r for r in read(out, "commands")}
    pings = [r for (n, _), r in rows.items() if n == "ping"]
    assert sum(r["sent"] for r in pings) == 4 and sum(r["answered"] for r in pings) == 3
    assert sum(r["ok"] for r in pings) == 3 and sum(r["unanswered"] for r in pings) == 1
    assert {v for n, v in rows if n == "ping"} == {fw[d] for d in devs}  # by each board's release
    samples = [r for (n, _), r in rows.items() if n == "sample"]
    assert sum(r["expired"] for r in samples) == 1 and sum(r["error"] for r in samples) == 1
    if len(pings) == 1:  # all four on one release: 1, 3, 5 s
        assert pings[0]["latency_p50_s"] == 3.0 and pings[0]["latency_p95_s"] == 5.0
    (c,) = read(out, "convergence")
    assert (c["change"], c["set_ts"], c["boards"], c["converged"]) == ("c1", T0, 3, 2)
    assert (c["converged_p50_s"], c["converged_max_s"]) == (4.0, 8.0)
    page = (out / "report.html").read_text()
    assert "<h2>Commands and desired state</h2>" in page and "sample" in page
    # an incremental run with no new telemetry makes the tables again when new events landed
    inc = tmp_path / "inc"
    job.run(
        spark, job.Config(input=str(root), out=str(inc), incremental=True, report=False, log=lambda m: None)
    )
    land(root, "collector-1", [(6000, devs[3], "answer", {"id": "p3", "status": "ok"})])
    job.run(
        spark, job.Config(input=str(root), out=str(inc), incremental=True, report=False, log=lambda m: None)
    )
    assert sum(r["answered"] for r in read(inc, "commands") if r["name"] == "ping") == 4

"""Why boards crash, in the fleet report: the crash records the collector landed
(LANDING/_crashes/) become the crashes, crash_signatures and crash_releases tables, report.html
shows each release's top signatures with a sample, and an incremental run keeps them whole."""

import json

import pandas as pd
import pytest

from fleetwire.host.analytics import crashes, generator, job

pytestmark = pytest.mark.spark

TB = (
    'Traceback (most recent call last):\n  File "main.py", line 1, in <module>\n'
    '  File "%s", line %d, in %s\n%s: %s\n'
)


def crash(
    landing, device, boot, cid, fw, typ="ZeroDivisionError", where=("app.py", 1, "step"), kind="exception"
):
    d = landing / "_crashes"
    d.mkdir(exist_ok=True)
    rec = {
        "device_id": device,
        "boot_id": boot,
        "crash_id": cid,
        "kind": kind,
        "fw_version": fw,
        "type": typ if kind == "exception" else None,
        "message": "divide by zero" if kind == "exception" else None,
        "traceback": TB % (where + (typ, "divide by zero")) if kind == "exception" else None,
        "log": ["reading 3", "averaging"] if kind == "exception" else [],
        "uptime_s": 60,
        "heap_free": 40000,
        "heap_largest": None,
        "ts": None,
        "rx_ts": 1_700_000_000_000 + boot * 1000,
    }
    (d / ("%s.%d.%d.json" % (device, boot, cid))).write_text(json.dumps(rec))


def read(out, name):
    return pd.read_parquet(str(out / name)).to_dict("records")


@pytest.fixture
def landing(tmp_path):
    df = generator.generate(devices=6, hours=2, seed=11)
    generator.write_landing(df, str(tmp_path / "landing"))
    return tmp_path / "landing", sorted(df["device_id"].unique()), sorted(df["fw_version"].unique())


def test_crash_records_become_tables_grouped_by_signature_and_release(spark, landing, tmp_path):
    root, devices, versions = landing
    new, old = versions[-1], versions[0]
    for i, dev in enumerate(devices[:3]):  # three devices divide by zero in step() on the new release
        crash(root, dev, 10 + i, 1, new)
    crash(root, devices[0], 20, 2, new)  # one of them twice
    crash(root, devices[3], 21, 1, new, "KeyError", ("device/sensor.py", 42, "read"))  # a build with lines
    crash(root, devices[4], 22, 1, old, "KeyError", ("device/sensor.py", 42, "read"))
    crash(root, devices[5], 23, 1, new, kind="watchdog")  # a reset, no crash of the program
    # the new release's symbol map (fleetwire bundle writes it): what step() in app.py is
    maps = tmp_path / "symbols"
    maps.mkdir()
    m = {
        "format": 1,
        "release": new,
        "files": {"app.py": [{"path": "app.py", "functions": [["App.step", "step", 40, 45]]}]},
    }
    (maps / ("app-%s.symbols.json" % new)).write_text(json.dumps(m))
    out = tmp_path / "out"
    job.run(spark, job.Config(input=str(root), out=str(out), symbols=str(maps), log=lambda m: None))

    rows = read(out, "crashes")
    assert len(rows) == 7
    sig = {r["signature"] for r in rows}
    assert sig == {"ZeroDivisionError in App.step (app.py)", "KeyError in read (sensor.py)", None}
    where = {r["location"] for r in rows}
    assert where == {
        "App.step (app.py:40-45)",
        "read (sensor.py:42)",
        None,
    }  # a line where the build kept them
    (wd,) = [r for r in rows if r["kind"] == "watchdog"]
    assert wd["signature"] is None and wd["location"] is None
    assert [r["log_tail"] for r in rows if r["signature"]][0] == "reading 3\naveraging"

    by = {(r["fw_version"], r["signature"]): r for r in read(out, "crash_signatures")}
    z = by[(new, "ZeroDivisionError in App.step (app.py)")]
    assert (z["crashes"], z["devices"]) == (4, 3)
    assert (z["first_seen"], z["last_seen"]) == (1_700_000_010_000, 1_700_000_020_000)
    assert z["sample_traceback"].endswith("ZeroDivisionError: divide by zero\n")
    assert z["sample_log"] == "reading 3\naveraging"
    assert by[(old, "KeyError in read (sensor.py)")]["devices"] == 1
    assert len(by) == 3  # the watchdog reset is no signature

    rel = {r["fw_version"]: r for r in read(out, "crash_releases")}
    cohort = {r["fw_version"]: r for r in read(out, "firmware_cohort")}
    n = cohort[new]["devices"]
    assert rel[new]["crashed_devices"] == 4 and rel[new]["crashes"] == 5
    assert rel[new]["crash_free_devices_pct"] == pytest.approx(100.0 * (n - 4) / n)

    page = (out / "report.html").read_text()
    assert (
        "Why boards crash" in page
        and "ZeroDivisionError in App.step (app.py:40-45)</code>: 3 devices, 4 crashes" in page
    )
    assert "reading 3\naveraging" in page

    # the rollout gate's pick: the top signature of a release, a new one first
    sigs = read(out, "crash_signatures")
    top, is_new = crashes.top(sigs, new, old)
    assert (top["signature"], is_new) == ("ZeroDivisionError in App.step (app.py)", True)
    assert crashes.named(top) == "ZeroDivisionError in App.step (app.py:40-45)"  # as the halt says it
    top, is_new = crashes.top(sigs, old, new)
    assert (top["signature"], is_new) == ("KeyError in read (sensor.py)", False)  # the same crash on both


def test_an_incremental_run_keeps_the_crash_tables_whole(spark, landing, tmp_path):
    root, devices, versions = landing
    out = tmp_path / "out"

    def run():
        job.run(
            spark,
            job.Config(input=str(root), out=str(out), incremental=True, report=False, log=lambda m: None),
        )
        return sorted((r["device_id"], r["boot_id"]) for r in read(out, "crashes"))

    assert run() == []  # none yet: empty tables, with their columns
    crash(root, devices[0], 5, 1, versions[-1])
    assert run() == [(devices[0], 5)]
    crash(root, devices[1], 6, 1, versions[-1])
    assert run() == [(devices[0], 5), (devices[1], 6)]
    assert read(out, "crash_signatures")[0]["devices"] == 2

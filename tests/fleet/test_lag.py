"""The simulator's own lag (fleetwire.host.fleet.lag): how late its records go out and how
many it never made, added up over workers, said in words where a person reads the run (the
summary, the progress line, the report's Input section), so that coverage the simulator lost
is never taken for the fleet's."""

import asyncio
import json
import os
import time

from fleetwire.host.analytics import landing
from fleetwire.host.fleet.lag import Lag, keep, lag_words, merge
from fleetwire.host.fleet.sim import Simulator


def test_a_record_late_by_less_than_a_period_counts_as_late_and_whole_periods_late_as_never_made():
    lag = Lag(period_real=1.0, speed=60)
    assert lag.keep(10.0, 10.001) == 10.0  # on time
    assert lag.keep(20.0, 23.4) == 23.0  # three periods the simulator could not make
    s = lag.summary()
    assert s["records_due"] == 5 and s["missed_periods"] == 3 and s["behind"]
    assert 0.39 < s["late_max_s"] <= 0.4 and s["late_max_simulated_s"] == 24.0


def test_a_simulator_that_keeps_up_says_nothing_and_one_behind_says_how_far():
    ok = Lag(0.5, 120)
    for i in range(1000):
        ok.keep(i * 0.5, i * 0.5 + 0.003)
    assert not ok.summary()["behind"] and lag_words(ok.summary()) == ""
    late = Lag(0.5, 120)
    for i in range(1000):
        late.keep(i * 0.5, i * 0.5 + (0.6 if i % 10 == 0 else 0.003))  # 1 in 10 misses a period
    words = lag_words(late.summary())
    assert "SIMULATOR BEHIND" in words and "100 of 1100 records never made (9.1 %)" in words
    assert "coverage lost to the simulator, not the fleet" in words


def test_the_workers_lags_add_up():
    a, b = Lag(0.5, 120), Lag(0.5, 120)
    a.keep(0, 0.001)
    b.keep(0, 1.2)  # two periods missed
    m = merge([a.summary(), b.summary(), None])
    assert m["records_due"] == 4 and m["missed_periods"] == 2 and m["behind"]
    assert merge([None]) is None


def test_a_starved_simulator_reports_its_lag_and_the_report_says_so(fresh_mosquitto, tmp_path):
    b = fresh_mosquitto()
    # the event loop blocked for 1.2 s every second: the devices (a record every 0.5 s) fall behind
    sim = Simulator(
        b.host,
        b.port,
        devices=5,
        period_s=60,
        speed=120,
        duration=6,
        silent_share=0,
        progress=lambda s: time.sleep(1.2),
    )
    res = asyncio.run(sim.run())
    lag = res["lag"]
    assert lag["behind"] and lag["missed_periods"] > 0 and lag["loop_lag_max_s"] >= 1.0
    assert lag["records_due"] == res["sent"] + lag["missed_periods"]
    # kept in the landing zone, where the report's Input section reads it
    path = keep(lag, str(tmp_path / "landing"))
    assert os.path.dirname(path) == str(tmp_path / "landing" / "_sim")
    q = {"records_read": 1, "valid_records": 1, "skipped_records": 0, "skipped": {}, "unreadable_files": []}
    q["simulator"] = merge([json.load(open(path))])
    line = landing.describe(q)[-1]
    assert line.startswith("  the simulator fell behind: %d of " % lag["missed_periods"])
    assert line.endswith("coverage lost to the simulator, not the fleet")

"""The simulator's own lag (fleetwire.host.fleet.sim): how late its devices publish against
their schedule, and the periods they could not make at all, so that a coverage drop the
simulator caused is never mistaken for the fleet's. keep() leaves a run's summary in the
landing zone (LANDING/_sim/), where `fleetwire report` shows it (fleetwire.host.analytics).

A device's records are due every period on the real clock (period_s / speed). keep() is told
when one goes out: the lateness is counted in a histogram of fixed buckets (a few integers
per process, and workers' histograms add up), and a device more than a whole period late
skips the periods it missed, counting them: those records were never made, and the report
would show them as lost coverage."""

import asyncio
import bisect
import json
import os
import time

# bucket upper bounds, real seconds; the last bucket is everything above
EDGES = (0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 60, 300)
# "behind": more than this share of the schedule missed, or the p95 lateness past this share of a period
MISSED_SHARE = 0.005
LATE_SHARE = 0.5


class Lag:
    def __init__(self, period_real, speed):
        self.period_real = period_real
        self.speed = speed
        self.hist = [0] * (len(EDGES) + 1)
        self.late_max = 0.0
        self.missed = 0  # periods skipped: records the simulator never made
        self.loop_max = 0.0  # the event loop's worst wake-up delay

    def keep(self, due, now):
        """A record due at `due` goes out at `now` -> when it counts as due (past missed periods)."""
        late = now - due
        if late >= self.period_real:
            n = int(late // self.period_real)
            self.missed += n
            due += n * self.period_real
            late -= n * self.period_real
        late = max(0.0, late)
        self.hist[bisect.bisect_left(EDGES, late)] += 1
        self.late_max = max(self.late_max, late)
        return due

    async def probe(self, every=0.5):
        """Watch the event loop: how much later than asked a sleep wakes up."""
        while True:
            t = time.monotonic()
            await asyncio.sleep(every)
            self.loop_max = max(self.loop_max, time.monotonic() - t - every)

    def summary(self):
        return summarize(self.hist, self.late_max, self.missed, self.loop_max, self.period_real, self.speed)


def merge(summaries):
    """Several processes' lag summaries -> one (the fleet's)."""
    summaries = [s for s in summaries if s]
    if not summaries:
        return None
    hist = [sum(c) for c in zip(*(s["hist"] for s in summaries))]
    first = summaries[0]
    return summarize(
        hist,
        max(s["late_max_s"] for s in summaries),
        sum(s["missed_periods"] for s in summaries),
        max(s["loop_lag_max_s"] for s in summaries),
        first["period_real_s"],
        first["speed"],
    )


def _quantile(hist, q):
    n = sum(hist)
    if not n:
        return 0.0
    k, seen = q * n, 0
    for i, c in enumerate(hist):
        seen += c
        if seen >= k:
            return EDGES[i] if i < len(EDGES) else float("inf")
    return float("inf")


def summarize(hist, late_max, missed, loop_max, period_real, speed):
    made = sum(hist)
    p95 = min(_quantile(hist, 0.95), late_max)
    share = missed / (made + missed) if made + missed else 0.0
    return {
        "behind": share > MISSED_SHARE or p95 > LATE_SHARE * period_real,
        "late_p50_s": min(_quantile(hist, 0.5), late_max),  # at most: a bucket's upper bound
        "late_p95_s": p95,
        "late_max_s": round(late_max, 3),
        "late_max_simulated_s": round(late_max * speed, 1),
        "missed_periods": missed,
        "missed_share": round(share, 4),
        "records_due": made + missed,
        "loop_lag_max_s": round(loop_max, 3),
        "period_real_s": period_real,
        "speed": speed,
        "hist": hist,
    }


def lag_words(s):
    """What a person reads: empty while the simulator keeps up."""
    if not s or not s["behind"]:
        return ""
    return (
        "| SIMULATOR BEHIND: p95 %.2g s late (%.0f simulated s), max %.1f s; %d of %d records never made "
        "(%.1f %%): coverage lost to the simulator, not the fleet "
        % (
            s["late_p95_s"],
            s["late_p95_s"] * s["speed"],
            s["late_max_s"],
            s["missed_periods"],
            s["records_due"],
            100 * s["missed_share"],
        )
    )


SIM_DIR = "_sim"  # under the landing zone: not records (the report reads date=*/hour=* only)


def keep(summary, landing):
    """Write a run's lag summary to LANDING/_sim/<time>-<pid>.json (whole, by rename) -> its path."""
    d = os.path.join(landing, SIM_DIR)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "%s-%d.json" % (time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()), os.getpid()))
    with open(path + ".part", "w") as f:
        json.dump(summary, f)
    os.rename(path + ".part", path)
    return path


def describe(s):
    """Lines for the report's Input section."""
    if s is None:
        return []
    if s["behind"]:
        return [
            "  the simulator fell behind: %d of %d records never made (%.1f %%), records late by up to "
            "%.2g s (p95; %.0f simulated s): coverage lost to the simulator, not the fleet"
            % (
                s["missed_periods"],
                s["records_due"],
                100 * s["missed_share"],
                s["late_p95_s"],
                s["late_p95_s"] * s["speed"],
            )
        ]
    return [
        "  the simulator kept its schedule: %d records due, %d never made, p95 lateness %.2g s"
        % (s["records_due"], s["missed_periods"], s["late_p95_s"])
    ]

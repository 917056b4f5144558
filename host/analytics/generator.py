"""A synthetic fleet: writes a landing zone of telemetry records as the collector would
(`OUT/date=YYYY-MM-DD/hour=HH/part-00000.ndjson`, partitioned by arrival time `rx_ts`).

The fleet has the faults a real one has, so the report has something to find:
  - loss (gaps in `seq`), worse on a few devices with a bad link
  - QoS1 duplicates (same record delivered twice, sometimes into the next hour's file)
  - a fleet-wide broker outage (records lost, every device reconnects once)
  - reboots: a crashier release (1.5.0: panics and watchdog resets), brownouts on low battery
  - an OTA rollout to 1.5.1 half-way through (deliberate reboot into the new release)
  - leaking heaps on some devices (heap_free falls with uptime, recovers on reboot)
  - battery drain (a few fast drainers), mains-powered boards without vbat_mv
  - devices going silent before the end of the data
  - optionally, boards that sleep (`awake`: the hours of the day, UTC, they report in); each
    wake from deep sleep is a boot, as on an ESP32 (reset cause "deliberate")

Deterministic for a given seed. numpy and pandas do the work per device; no Spark needed.
"""

import datetime as _dt
import json
import os

from fleetwire.host.analytics.schema import FIELD_NAMES, FIELDS

DEFAULT_START = "2026-01-05T00:00:00Z"
RELEASES = {
    # version: (unexpected resets per device-hour, extra heap leak bytes/hour)
    "1.4.2": (0.004, 0.0),
    "1.5.0": (0.05, 300.0),
    "1.5.1": (0.003, 0.0),
}


def parse_time(text):
    """ISO 8601 (a trailing Z is UTC; a date alone is midnight UTC) -> epoch ms."""
    t = text.strip().replace("Z", "+00:00")
    d = _dt.datetime.fromisoformat(t)
    if d.tzinfo is None:
        d = d.replace(tzinfo=_dt.timezone.utc)
    return int(d.timestamp() * 1000)


def generate(devices=50, hours=24, seed=7, start=DEFAULT_START, dup_rate=0.01, silent_rate=0.03, awake=None):
    """The fleet's records as a pandas DataFrame (one row per delivered message, duplicates
    included), columns in schema order. `awake`, hours of the day (0-23, UTC): the boards
    sleep the others, and each wake is a boot."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(seed)
    t0 = parse_time(start) if isinstance(start, str) else int(start)
    end = t0 + int(hours * 3600_000)
    outage_start = t0 + int(hours * 0.4 * 3600_000)
    outage_end = outage_start + 25 * 60_000
    ota_start, ota_len = t0 + int(hours * 0.5 * 3600_000), max(1, int(hours * 0.25 * 3600_000))
    parts = []
    n_silent = max(1 if devices >= 10 else 0, int(round(devices * silent_rate)))
    silent = set(rng.choice(devices, size=min(devices, n_silent), replace=False).tolist())
    for d in range(devices):
        period = int(rng.choice([60, 60, 60, 60, 60, 60, 60, 30, 120]))
        first = t0 + int(rng.integers(0, period * 1000))
        stop = end
        if d in silent:
            stop = t0 + int(hours * rng.uniform(0.3, 0.9) * 3600_000)
        n = max(1, (stop - first) // (period * 1000))
        k = np.arange(n)
        ts_true = first + k * period * 1000
        fw0 = "1.5.0" if rng.random() < 0.3 else "1.4.2"
        ota_at = ota_start + int(rng.integers(0, ota_len)) if rng.random() < 0.6 else None
        fw = np.full(n, fw0, dtype=object)
        ota_idx = None
        if ota_at is not None and ota_at < ts_true[-1]:
            ota_idx = int(np.searchsorted(ts_true, ota_at))
            fw[ota_idx:] = "1.5.1"
        crash_rate = np.array([RELEASES[v][0] for v in fw]) * period / 3600.0
        leak_extra = np.array([RELEASES[v][1] for v in fw])
        vbat0 = rng.uniform(3850, 4150)
        drain = rng.uniform(1, 4) if rng.random() > 0.05 else rng.uniform(20, 40)
        vbat_true = vbat0 - drain * (ts_true - t0) / 3600_000.0
        # resets: a record flagged here is the first one after the reboot
        u = rng.random(n)
        low_batt = vbat_true < 3450
        cause = np.full(n, None, dtype=object)
        crash = u < crash_rate + low_batt * (0.02 * period / 60.0)
        kind = rng.random(n)
        cause[crash] = np.where(low_batt[crash], "brownout", np.where(kind[crash] < 0.6, "panic", "watchdog"))
        cause[(u > 0.9999) & ~crash] = "power_on"
        if ota_idx is not None and ota_idx < n:
            cause[ota_idx] = "deliberate"
        fresh = rng.random() < 0.5
        if fresh:
            cause[0] = "power_on"
        else:
            cause[0] = None
        on = np.ones(n, dtype=bool)
        if awake is not None:  # asleep: nothing happens, nothing is sent; each wake is a boot
            on = np.isin((ts_true // 3600_000) % 24, list(awake))
            cause[~on] = None
            woke = on & ~np.concatenate(([False], on[:-1]))
            cause[woke & (cause == None)] = "deliberate"  # noqa: E711  (object array)
        boot_start = cause != None  # noqa: E711  (object array)
        boot_no = np.cumsum(boot_start) - (1 if fresh else 0)
        boot_id = int(rng.integers(1, 60)) + boot_no
        # uptime: seconds since the boot's first record (+ a few seconds of boot)
        idx = np.arange(n)
        start_idx = np.maximum.accumulate(np.where(boot_start, idx, 0))
        up0 = 0 if fresh else int(rng.integers(3600, 30 * 86400))
        uptime = (ts_true - ts_true[start_idx]) // 1000 + 4
        if not fresh:
            uptime = np.where(boot_no == boot_no[0], uptime + up0, uptime)
        leak = (rng.uniform(1500, 6000) if rng.random() < 0.08 else 0.0) + leak_extra
        heap = 60000 + rng.integers(-4000, 4000) - leak * np.minimum(uptime, 48 * 3600) / 3600.0
        heap = np.maximum(2048, heap + rng.normal(0, 300, n)).astype(np.int64)
        heap_min = np.maximum(1024, heap - rng.integers(0, 3000, n))
        rssi_mean = rng.uniform(-88, -50)
        rssi = np.round(rssi_mean + rng.normal(0, 3, n)).astype(np.int64)
        latency = np.round(rng.lognormal(np.log(25 + (-rssi_mean - 50) * 2), 0.45, n)).astype(np.int64)
        mains = rng.random() < 0.15
        vbat = np.round(vbat_true + rng.normal(0, 4, n)).astype(np.int64)
        # delivery: per-device loss, the fleet outage, duplicates
        p_loss = rng.uniform(0.002, 0.02) if rng.random() > 0.04 else rng.uniform(0.15, 0.3)
        in_outage = (ts_true >= outage_start) & (ts_true < outage_end)
        lost = (rng.random(n) < p_loss) | in_outage
        lost &= cause == None  # noqa: E711  reset records carry the cause: keep them visible
        reconnects = (
            int(rng.integers(0, 20))
            + np.cumsum(rng.random(n) < (p_loss * 0.2 + 0.002))
            + (ts_true >= outage_end)
            + np.cumsum(boot_start)
        )
        publish_fail = int(rng.integers(0, 5)) + np.cumsum(lost & ~in_outage)
        queue_drops = np.cumsum(in_outage & (rng.random(n) < 0.5))
        skew = int(rng.integers(-2000, 2000))
        ts = ts_true + skew + rng.integers(0, 200, n)
        rx_ts = ts_true + latency + rng.integers(5, 300, n)
        seq0 = int(rng.integers(0, 100000))
        df = pd.DataFrame(
            {
                "device_id": "dev-%05d" % d,
                "fw_version": fw,
                "boot_id": boot_id.astype(np.int64),
                "ts": ts.astype(np.int64),
                "seq": seq0 + k,
                "uptime_s": uptime.astype(np.int64),
                "heap_free": heap,
                "heap_min": heap_min.astype(np.int64),
                "rssi": rssi,
                "vbat_mv": pd.array(vbat, dtype="Int64")
                if not mains
                else pd.array([None] * n, dtype="Int64"),
                "reconnects": reconnects.astype(np.int64),
                "publish_fail": publish_fail.astype(np.int64),
                "queue_drops": queue_drops.astype(np.int64),
                "queue_depth": rng.integers(0, 4, n),
                "store_used": rng.integers(0, 2048, n),
                "publish_latency_ms": latency.astype(np.float64),
                "reset_cause": cause,
                "period_s": np.int64(period),
                "rx_ts": rx_ts.astype(np.int64),
            }
        )
        df = df[~lost & on]
        dups = df[rng.random(len(df)) < dup_rate].copy()
        dups["rx_ts"] = dups["rx_ts"] + rng.integers(1000, 90_000, len(dups))
        parts.append(df)
        parts.append(dups)
    out = pd.concat(parts, ignore_index=True)
    return out[FIELD_NAMES]


def write_landing(df, out, fmt="ndjson"):
    """Write records as the collector lands them: one file per (date, hour) of rx_ts.
    Returns the list of files written."""
    if fmt not in ("ndjson", "parquet"):
        raise ValueError("format must be ndjson or parquet, not %r" % fmt)
    hours = df["rx_ts"].to_numpy() // 3600_000  # group by the hour number, format each key once
    written = []
    for hour, part in df.groupby(hours, sort=True):
        key = _dt.datetime.fromtimestamp(int(hour) * 3600, _dt.timezone.utc).strftime("date=%Y-%m-%d/hour=%H")
        d = os.path.join(out, key)
        os.makedirs(d, exist_ok=True)
        part = part.sort_values("rx_ts", kind="stable")
        n = 0
        while os.path.exists(os.path.join(d, "part-%05d.%s" % (n, fmt))):
            n += 1  # a later run adds files; it never rewrites landed ones
        path = os.path.join(d, "part-%05d.%s" % (n, fmt))
        if fmt == "ndjson":
            part.to_json(path, orient="records", lines=True)
        else:  # the declared types, also for a file whose reset_cause (or vbat_mv) is all null
            import pyarrow as pa
            import pyarrow.parquet as pq

            kinds = {"string": pa.string(), "long": pa.int64(), "double": pa.float64()}
            schema = pa.schema([(n, kinds[k]) for n, k in FIELDS])
            pq.write_table(pa.Table.from_pandas(part, schema=schema, preserve_index=False), path)
        written.append(path)
    return written


def write_records(records, path):
    """Write a list of dicts (or raw strings, written as they are) as an NDJSON file; for
    hand-made landing zones in tests and examples."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for r in records:
            f.write((r if isinstance(r, str) else json.dumps(r)) + "\n")
    return path

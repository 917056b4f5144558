"""An independent implementation of the `fleetwire report` definitions in DuckDB (+ pandas for
the tiny cohort/outlier steps), for tests and the bench only. It is written from the
definitions in fleetwire.host.analytics.metrics' docstring, not from the Spark code: it
deduplicates with row_number, takes percentiles by explicit rank, computes device_health
straight from the records (Spark goes through the windows) and slopes with regr_* aggregates.

It assumes clean input (the generator's): records missing a required field are dropped.
"""

import math
import re

import duckdb
import numpy as np
import pandas as pd

WINDOW_MS = 300_000
HOUR_MS = 3_600_000
SILENT_AFTER_S = 30 * 60
EXPECTED = ("power_on", "deliberate")
COLUMNS = {
    "device_id": "VARCHAR",
    "fw_version": "VARCHAR",
    "boot_id": "BIGINT",
    "ts": "BIGINT",
    "seq": "BIGINT",
    "uptime_s": "BIGINT",
    "heap_free": "BIGINT",
    "heap_min": "BIGINT",
    "rssi": "BIGINT",
    "vbat_mv": "BIGINT",
    "reconnects": "BIGINT",
    "publish_fail": "BIGINT",
    "queue_drops": "BIGINT",
    "queue_depth": "BIGINT",
    "store_used": "BIGINT",
    "publish_latency_ms": "DOUBLE",
    "reset_cause": "VARCHAR",
    "period_s": "BIGINT",
    "rx_ts": "BIGINT",
}


def _source(files, fmt):
    lst = "[%s]" % ", ".join("'%s'" % f.replace("'", "''") for f in files)
    if fmt == "parquet":
        return "read_parquet(%s)" % lst
    cols = "{%s}" % ", ".join("'%s': '%s'" % kv for kv in COLUMNS.items())
    return "read_json(%s, format='newline_delimited', columns=%s)" % (lst, cols)


def compute(
    files,
    fmt="ndjson",
    silent_after_s=SILENT_AFTER_S,
    min_cohort=5,
    z=3.5,
    threads=2,
    memory_limit=None,
    clean_out=None,
):
    """{table name: pandas DataFrame} for device_window, device_health, firmware_cohort, outliers,
    and clean_count. With clean_out, the deduplicated records are also written there as Parquet
    partitioned by date, as the Spark job writes its `clean` table (the bench wants equal work)."""
    con = duckdb.connect()
    con.execute("SET threads = %d" % threads)
    if memory_limit:
        con.execute("SET memory_limit = '%s'" % memory_limit)
    con.execute(
        """
        CREATE TEMP TABLE clean AS
        SELECT * EXCLUDE (rn),
               ts - ts %% %d AS window_ms, ts - ts %% %d AS hour_ms,
               CASE WHEN reset_cause IS NOT NULL AND reset_cause NOT IN ('power_on', 'deliberate')
                    THEN 1 ELSE 0 END AS unexpected
        FROM (SELECT *, row_number() OVER (PARTITION BY device_id, seq ORDER BY rx_ts) AS rn,
                     count(*) OVER (PARTITION BY device_id, seq) AS copies
              FROM %s
              WHERE device_id IS NOT NULL AND seq IS NOT NULL AND ts IS NOT NULL AND boot_id IS NOT NULL
                AND fw_version IS NOT NULL AND period_s > 0)
        WHERE rn = 1"""
        % (WINDOW_MS, HOUR_MS, _source(files, fmt))
    )
    out = {"clean_count": con.execute("SELECT count(*) FROM clean").fetchone()[0]}
    if clean_out:
        con.execute(
            """COPY (SELECT %s, copies, CAST(to_timestamp(ts / 1000.0) AT TIME ZONE 'UTC' AS DATE) AS date FROM clean)
                       TO '%s' (FORMAT parquet, PARTITION_BY (date), OVERWRITE_OR_IGNORE)"""
            % (", ".join(COLUMNS), clean_out.replace("'", "''"))
        )

    def nearest_rank(group, col, ps, where):
        pcols = ", ".join(
            "max(x) FILTER (WHERE rn = ceil(%r * n)) AS p%s" % (p, str(p)[2:].ljust(2, "0")) for p in ps
        )
        return """(SELECT %s, %s FROM (
                     SELECT %s, %s AS x, row_number() OVER (PARTITION BY %s ORDER BY %s) AS rn,
                            count(*) OVER (PARTITION BY %s) AS n
                     FROM clean WHERE %s) GROUP BY %s)""" % (
            group,
            pcols,
            group,
            col,
            group,
            col,
            group,
            where,
            group,
        )

    out["device_window"] = con.execute(
        """
        WITH w AS (
            SELECT device_id, window_ms,
                   arg_max(fw_version, seq) AS fw_version,
                   sum(copies) AS records, count(*) AS distinct_seq,
                   min(seq) AS min_seq, max(seq) AS max_seq, arg_max(period_s, seq) AS period_s,
                   min(rssi) AS rssi_min, avg(rssi) AS rssi_avg, max(rssi) AS rssi_max,
                   arg_max_null(heap_free, seq) - arg_min_null(heap_free, seq) AS heap_delta,
                   arg_min_null(reconnects, seq) AS rec_first, arg_max_null(reconnects, seq) AS rec_last,
                   sum(unexpected) AS unexpected_resets
            FROM clean GROUP BY device_id, window_ms)
        SELECT w.device_id, w.window_ms, fw_version, records, distinct_seq, records - distinct_seq AS dup_records,
               distinct_seq / (300.0 / period_s) AS coverage,
               1 - distinct_seq / (max_seq - min_seq + 1) AS loss_rate,
               rssi_min, rssi_avg, rssi_max, l.p50 AS latency_p50, l.p95 AS latency_p95, heap_delta,
               rec_last - coalesce(lag(rec_last) OVER (PARTITION BY w.device_id ORDER BY min_seq), rec_first)
                   AS reconnects,
               unexpected_resets, period_s, min_seq, max_seq
        FROM w LEFT JOIN %s l USING (device_id, window_ms)
        ORDER BY device_id, window_ms"""
        % nearest_rank(
            "device_id, window_ms", "publish_latency_ms", (0.5, 0.95), "publish_latency_ms IS NOT NULL"
        )
    ).df()

    out["device_health"] = con.execute(
        """
        WITH d AS (
            SELECT device_id, arg_max(fw_version, seq) AS fw_version, min(ts) AS first_ts, max(ts) AS last_ts,
                   sum(copies) AS records, count(*) AS distinct_seq, min(seq) AS min_seq, max(seq) AS max_seq,
                   arg_max(period_s, seq) AS period_s, count(DISTINCT boot_id) - 1 AS reboots,
                   sum(unexpected) AS unexpected_resets,
                   arg_max_null(reconnects, seq) - arg_min_null(reconnects, seq) AS reconnects,
                   min(vbat_mv) AS vbat_min,
                   -regr_slope(vbat_mv, ts / 3600000.0) AS vbat_drop_per_hour
            FROM clean GROUP BY device_id),
        b AS (
            SELECT device_id, sum(coalesce(sxy, 0)) AS sxy, sum(coalesce(sxx, 0)) AS sxx FROM (
                SELECT device_id, boot_id, regr_sxy(heap_free, uptime_s / 3600.0) AS sxy,
                       regr_sxx(heap_free, uptime_s / 3600.0) AS sxx
                FROM clean GROUP BY device_id, boot_id) GROUP BY device_id),
        h AS (
            SELECT device_id, count(*) AS active_hours, sum(1 - crashed) AS crash_free_hours FROM (
                SELECT device_id, hour_ms, max(unexpected) AS crashed FROM clean GROUP BY device_id, hour_ms)
            GROUP BY device_id)
        SELECT d.*, (SELECT max(ts) FROM clean) - last_ts >= %d AS silent,
               distinct_seq / (round((last_ts - first_ts) / (period_s * 1000.0)) + 1) AS coverage,
               1 - distinct_seq / (max_seq - min_seq + 1) AS loss_rate,
               active_hours, crash_free_hours, 100.0 * crash_free_hours / active_hours AS crash_free_hours_pct,
               reconnects / active_hours AS reconnects_per_hour,
               CASE WHEN b.sxx > 0 THEN -b.sxy / b.sxx END AS heap_leak_bytes_per_hour
        FROM d JOIN b USING (device_id) JOIN h USING (device_id) ORDER BY device_id"""
        % (silent_after_s * 1000)
    ).df()

    hours_fw = """(SELECT device_id, hour_ms, fw_version, max(unexpected) AS crashed FROM clean
                   GROUP BY device_id, hour_ms, fw_version)"""
    cohort = con.execute(
        """
        WITH h AS (SELECT fw_version, count(DISTINCT device_id) AS devices, count(*) AS device_hours,
                          sum(1 - crashed) AS crash_free_hours FROM %s GROUP BY fw_version),
             r AS (SELECT fw_version, count(*) AS records, sum(unexpected) AS unexpected_resets
                   FROM clean GROUP BY fw_version)
        SELECT h.*, 100.0 * crash_free_hours / device_hours AS crash_free_hours_pct, r.records,
               rs.p05 AS rssi_p05, rs.p50 AS rssi_p50, la.p50 AS latency_p50, la.p95 AS latency_p95,
               r.unexpected_resets
        FROM h JOIN r USING (fw_version) LEFT JOIN %s rs USING (fw_version) LEFT JOIN %s la USING (fw_version)
        """
        % (
            hours_fw,
            nearest_rank("fw_version", "rssi", (0.05, 0.5), "rssi IS NOT NULL"),
            nearest_rank("fw_version", "publish_latency_ms", (0.5, 0.95), "publish_latency_ms IS NOT NULL"),
        )
    ).df()
    con.register("dw", out["device_window"])
    ws = con.execute("""SELECT fw_version, avg(coverage) AS mean_coverage, avg(loss_rate) AS mean_loss_rate,
                               sum(reconnects) AS reconnects FROM dw GROUP BY fw_version""").df()
    cohort = cohort.merge(ws, on="fw_version", how="left")
    cohort["reconnects_per_device_hour"] = cohort["reconnects"] / cohort["device_hours"]
    cohort = cohort.sort_values("fw_version", key=lambda s: s.map(version_key)).reset_index(drop=True)
    cohort["prev_fw_version"] = cohort["fw_version"].shift(1)
    cohort["crash_free_hours_pct_delta"] = cohort["crash_free_hours_pct"].diff()
    cohort["mean_loss_rate_delta"] = cohort["mean_loss_rate"].diff()
    out["firmware_cohort"] = cohort
    out["outliers"] = outliers(out["device_health"], min_cohort, z)
    con.close()
    return out


def version_key(v):
    return tuple(int(m.group(1)) if m else -1 for m in (re.match(r"^(\d+)", p) for p in str(v).split("."))), v


def outliers(health, min_cohort=5, z=3.5):
    rows = []
    metrics = ["loss_rate", "reconnects_per_hour", "heap_leak_bytes_per_hour", "vbat_drop_per_hour"]
    for (fw, metric), g in (
        health.melt(id_vars=["device_id", "fw_version"], value_vars=metrics, var_name="metric")
        .dropna(subset=["value"])
        .groupby(["fw_version", "metric"])
    ):
        vals = g["value"].astype(float)
        if len(vals) < min_cohort:
            continue
        med = float(np.median(vals))
        ad = (vals - med).abs()
        mad, mean_ad = float(np.median(ad)), float(ad.mean())
        for dev, v in zip(g["device_id"], vals):
            if mad > 0:
                s = (v - med) / (1.4826 * mad)
            elif mean_ad > 0:
                s = (v - med) / (1.2533 * mean_ad)
            else:
                continue
            if s > z:
                rows.append(
                    {
                        "device_id": dev,
                        "fw_version": fw,
                        "metric": metric,
                        "value": v,
                        "cohort_median": med,
                        "cohort_mad": mad,
                        "cohort_devices": len(vals),
                        "score": s,
                    }
                )
    return pd.DataFrame(
        rows,
        columns=[
            "device_id",
            "fw_version",
            "metric",
            "value",
            "cohort_median",
            "cohort_mad",
            "cohort_devices",
            "score",
        ],
    )


def to_ms(series):
    """Timestamps (as Spark writes them to Parquet and pandas reads them) -> epoch ms."""
    s = pd.to_datetime(series, utc=True)
    return (s - pd.Timestamp(0, tz="UTC")) // pd.Timedelta(milliseconds=1)


def differences(spark_df, ref_df, keys, rel=1e-9, abs_tol=1e-9, limit=10):
    """Human-readable mismatches between two tables (empty list: they agree). Columns compared are
    those of ref_df; floats within rel/abs tolerance, everything else exactly."""
    problems = []
    a, b = spark_df.copy(), ref_df.copy()
    if len(a) != len(b):
        problems.append("row counts differ: spark %d, reference %d" % (len(a), len(b)))
    m = a.merge(b, on=keys, how="outer", suffixes=("_s", "_r"), indicator=True)
    only = m[m["_merge"] != "both"]
    if len(only):
        problems.append("keys on one side only: %s" % only[keys + ["_merge"]].head(limit).to_dict("records"))
    m = m[m["_merge"] == "both"]
    for c in b.columns:
        if c in keys or c + "_s" not in m:
            continue
        s, r = m[c + "_s"], m[c + "_r"]
        if pd.api.types.is_numeric_dtype(r) and not pd.api.types.is_bool_dtype(r):
            s, r = pd.to_numeric(s).astype(float), pd.to_numeric(r).astype(float)
            both_nan = s.isna() & r.isna()
            close = np.isclose(s, r, rtol=rel, atol=abs_tol) | both_nan
        else:
            close = (s.astype(object).where(s.notna(), None) == r.astype(object).where(r.notna(), None)) | (
                s.isna() & r.isna()
            )
        bad = m[~close]
        if len(bad):
            problems.append(
                "%s differs in %d rows, e.g. %s"
                % (c, len(bad), bad[keys + [c + "_s", c + "_r"]].head(3).to_dict("records"))
            )
    return problems


def isclose(a, b, rel=1e-9):
    return math.isclose(a, b, rel_tol=rel, abs_tol=1e-12)

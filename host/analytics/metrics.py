"""The metric definitions, in Spark. Every table is a function of the deduplicated records.

Definitions (the README's "Fleet analytics" section repeats them):
  clean           valid records, one per (device_id, seq): the copy with the lowest rx_ts is kept;
                  `copies` says how many were delivered. Partitioned by `date` (UTC, from ts).
  device_window   per device and 5-minute tumbling window of ts (UTC, aligned to the epoch):
    fw_version      of the window's last record (highest seq)
    records         delivered records (duplicates included); distinct_seq: distinct seq;
                    dup_records = records - distinct_seq
    coverage        distinct_seq / (300 / period_s), period_s of the window's last record
                    (not capped: clock jitter can put one report more in a window)
    loss_rate       1 - distinct_seq / (max_seq - min_seq + 1)
    rssi_min/avg/max, latency_p50/p95 (nearest rank: the ceil(p*n)-th smallest value)
    heap_delta      heap_free of the last record - heap_free of the first (by seq)
    reconnects      the lifetime counter at the window's last record minus at the device's
                    previous window's last record (the window's first record for its first window)
    unexpected_resets  records whose reset_cause is set and not power_on/deliberate
  device_health   per device over the whole input:
    fw_version      of its highest seq; first_seen, last_seen: min/max ts
    silent          newest ts in the data - last_seen >= silent_after (30 min)
    coverage        distinct_seq / (round((last_ts - first_ts) / period) + 1), latest period
    loss_rate       1 - distinct_seq / (max_seq - min_seq + 1)
    reboots         distinct boot_id - 1; unexpected_resets as above
    crash_free_hours_pct  100 * UTC hours with a record and no unexpected reset / hours with a record
    reconnects      counter at the highest seq - at the lowest; reconnects_per_hour = / active_hours
    heap_leak_bytes_per_hour  -(least-squares slope of heap_free on uptime, pooled within boots:
                    sum of per-boot Sxy / sum of per-boot Sxx), null without two points in a boot
    vbat_min, vbat_drop_per_hour  -(least-squares slope of vbat_mv on ts over all its records), mV/h
  firmware_cohort per fw_version (of the record, or of the window for window metrics):
    devices, device_hours (device, UTC hour) pairs with a record on it, crash_free_hours_pct over
    those, rssi_p05/p50 and latency_p50/p95 (nearest rank over its records), mean_coverage and
    mean_loss_rate (mean over its device windows), reconnects_per_device_hour (window reconnects /
    device_hours), unexpected_resets; prev_fw_version is the next lower version (numeric
    dot-separated order) with the deltas of crash-free hours and loss against it.
  outliers        per release with at least MIN_COHORT devices (by device_health.fw_version) and metric
                  (loss_rate, reconnects_per_hour, heap_leak_bytes_per_hour, vbat_drop_per_hour):
                  score = (value - median) / (1.4826 * MAD), or / (1.2533 * mean absolute deviation)
                  when MAD is 0; a device is listed when score > OUTLIER_Z (worse than its cohort).
"""

from pyspark import StorageLevel
from pyspark.sql import Window
from pyspark.sql import functions as F

from fleetwire.host.analytics import schema as S

BIG = 2**63 - 1
HOUR_MS = 3600_000


def dedup(classified, partitions=None):
    """Group delivered records by (device_id, seq, _problem): one row each with `copies`.
    Rows with a _problem are kept (grouped) only so that they can be counted.
    With `partitions`, the records are first hash-partitioned by device_id: every later grouping
    starts with device_id, so this is the job's one shuffle of records (no partial aggregation
    on the read side, no re-shuffle by (device_id, seq), none for the windows, boots, hours)."""
    if partitions:
        classified = classified.repartition(int(partitions), "device_id")
    rest = [c for c in S.FIELD_NAMES if c not in ("device_id", "seq")]
    key = F.coalesce(F.col("rx_ts"), F.lit(BIG))
    # min_by compares the key alone (min of a struct compared every field): the copies of
    # a record differ only in rx_ts, so which of two equal keys wins does not matter.
    g = classified.groupBy("device_id", "seq", "_problem").agg(
        F.count(F.lit(1)).alias("copies"), F.min_by(F.struct(*rest), key).alias("_r")
    )
    return g.select("device_id", "seq", "_problem", "copies", *[F.col("_r." + c).alias(c) for c in rest])


def clean_records(deduped):
    """The valid, deduplicated records with the derived columns the tables group by."""
    ts = F.col("ts")
    return (
        deduped.filter(F.col("_problem").isNull())
        .drop("_problem")
        .withColumn("window_ms", ts - F.pmod(ts, F.lit(S.WINDOW_S * 1000)))
        .withColumn("hour_ms", ts - F.pmod(ts, F.lit(HOUR_MS)))
        .withColumn("date", F.to_date(F.timestamp_millis(ts)))
        .withColumn(
            "unexpected",
            F.when(
                F.col("reset_cause").isNotNull() & ~F.col("reset_cause").isin(*S.EXPECTED_RESETS), 1
            ).otherwise(0),
        )
    )


def release_percentiles(clean, col, ps):
    """Nearest-rank percentiles of `col` per fw_version ({name: p}): the ceil(p*n)-th smallest
    non-null value, n the release's non-null values. Computed from the release's histogram
    (value -> count, a hash aggregate) and its running count, not by sorting every record."""
    from fractions import Fraction

    h = clean.filter(F.col(col).isNotNull()).groupBy("fw_version", col).agg(F.count(F.lit(1)).alias("_n"))
    run = (
        Window.partitionBy("fw_version")
        .orderBy(col)
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    h = h.withColumn("_cum", F.sum("_n").over(run)).withColumn(
        "_tot", F.sum("_n").over(Window.partitionBy("fw_version"))
    )
    aggs = []
    for name, p in ps.items():
        f = Fraction(str(p))
        k = F.expr("(%d * _tot + %d) div %d" % (f.numerator, f.denominator - 1, f.denominator))
        aggs.append(F.min(F.when(F.col("_cum") >= k, F.col(col))).alias(name))
    return h.groupBy("fw_version").agg(*aggs)


def _nearest_rank(sorted_col, p):
    # the ceil(p*n)-th smallest of a window's few values (as percentile_disc, which sorts
    # through a generic aggregate and cost more than the rest of the window together)
    n = F.size(sorted_col)
    k = F.greatest(F.lit(1), F.ceil(F.lit(p) * n - F.lit(1e-9))).cast("int")
    return F.when(n > 0, F.element_at(sorted_col, k))


def windows(clean):
    """device_window with the private columns (prefixed _) that device_health combines."""
    has_v = F.col("vbat_mv").isNotNull()
    t = F.when(has_v, (F.col("ts") - F.col("window_ms")) / float(HOUR_MS))  # hours into the window
    v = F.col("vbat_mv").cast("double")
    # Two aggregates over the same (co-partitioned) groups, joined without a shuffle: the
    # fixed-width one runs as a code-generated hash aggregate; the string and list ones
    # (fw_version, the latencies) need an object hash aggregate, which costs several times as
    # much per aggregate function, so it gets only those two.
    objs = clean.groupBy("device_id", "window_ms").agg(
        F.max_by("fw_version", "seq").alias("fw_version"),
        F.sort_array(F.collect_list("publish_latency_ms")).alias("_lat"),
    )
    w = (
        clean.groupBy("device_id", "window_ms")
        .agg(
            F.sum("copies").alias("records"),
            F.count(F.lit(1)).alias("distinct_seq"),
            F.min("seq").alias("min_seq"),
            F.max("seq").alias("max_seq"),
            F.max_by("period_s", "seq").alias("period_s"),
            F.min("rssi").alias("rssi_min"),
            F.avg("rssi").alias("rssi_avg"),
            F.max("rssi").alias("rssi_max"),
            F.min_by("heap_free", "seq").alias("_heap_first"),
            F.max_by("heap_free", "seq").alias("_heap_last"),
            F.min_by("reconnects", "seq").alias("_rec_first"),
            F.max_by("reconnects", "seq").alias("_rec_last"),
            F.sum("unexpected").alias("unexpected_resets"),
            F.min("ts").alias("_ts_min"),
            F.max("ts").alias("_ts_max"),
            F.min("vbat_mv").alias("_vbat_min"),
            F.count("vbat_mv").alias("_vn"),
            F.sum(t).alias("_vt"),
            F.sum(v).alias("_vv"),
            F.sum(t * v).alias("_vtv"),
            F.sum(t * t).alias("_vtt"),
        )
        .join(objs.hint("shuffle_hash"), ["device_id", "window_ms"])
    )
    prev = Window.partitionBy("device_id").orderBy("min_seq")
    return (
        w.withColumn("latency_p50", _nearest_rank("_lat", 0.5))
        .withColumn("latency_p95", _nearest_rank("_lat", 0.95))
        .drop("_lat")
        .withColumn("dup_records", F.col("records") - F.col("distinct_seq"))
        .withColumn("coverage", F.col("distinct_seq") / (F.lit(float(S.WINDOW_S)) / F.col("period_s")))
        .withColumn("loss_rate", 1 - F.col("distinct_seq") / (F.col("max_seq") - F.col("min_seq") + 1))
        .withColumn("heap_delta", F.col("_heap_last") - F.col("_heap_first"))
        .withColumn(
            "reconnects", F.col("_rec_last") - F.coalesce(F.lag("_rec_last").over(prev), F.col("_rec_first"))
        )
        .withColumn("window_start", F.timestamp_millis(F.col("window_ms")))
    )


WINDOW_COLUMNS = [
    "device_id",
    "window_start",
    "fw_version",
    "records",
    "distinct_seq",
    "dup_records",
    "coverage",
    "loss_rate",
    "rssi_min",
    "rssi_avg",
    "rssi_max",
    "latency_p50",
    "latency_p95",
    "heap_delta",
    "reconnects",
    "unexpected_resets",
    "period_s",
    "min_seq",
    "max_seq",
]


def hours_by_release(clean):
    """(device_id, hour_ms, fw_version) -> crashed (1 if an unexpected reset happened), and the
    hour's records and unexpected resets (summed per release by firmware_cohort)."""
    return clean.groupBy("device_id", "hour_ms", "fw_version").agg(
        F.max("unexpected").alias("crashed"),
        F.count(F.lit(1)).alias("records"),
        F.sum("unexpected").alias("unexpected_resets"),
    )


def boots(clean):
    """Per (device, boot): the moments of heap_free on uptime (hours) for the leak slope."""
    ok = F.col("uptime_s").isNotNull() & F.col("heap_free").isNotNull()
    u = F.when(ok, F.col("uptime_s") / 3600.0)
    h = F.when(ok, F.col("heap_free").cast("double"))
    b = clean.groupBy("device_id", "boot_id").agg(
        F.count(u).alias("n"),
        F.sum(u).alias("su"),
        F.sum(h).alias("sh"),
        F.sum(u * h).alias("suh"),
        F.sum(u * u).alias("suu"),
    )
    return b.select(
        "device_id",
        F.when(F.col("n") > 0, F.col("suh") - F.col("su") * F.col("sh") / F.col("n"))
        .otherwise(0.0)
        .alias("sxy"),
        F.when(F.col("n") > 0, F.col("suu") - F.col("su") * F.col("su") / F.col("n"))
        .otherwise(0.0)
        .alias("sxx"),
    )


def device_health(win, boot, hours_fw, silent_after_s=S.SILENT_AFTER_S, first_window_ms=None, newest_ts=None):
    """first_window_ms (the earliest window_start, ms) and newest_ts (the newest ts in the data)
    are computed from `win` when not given; the job passes them from its first action."""
    if first_window_ms is None:
        ref = win.agg(F.min("window_ms").alias("_ref"))
        wv = win.crossJoin(F.broadcast(ref))
    else:
        wv = win.withColumn("_ref", F.lit(int(first_window_ms)).cast("long"))
    wv = wv.withColumn("_c", (F.col("window_ms") - F.col("_ref")) / float(HOUR_MS))
    c, n = F.col("_c"), F.col("_vn")
    d = wv.groupBy("device_id").agg(
        F.max_by("fw_version", "max_seq").alias("fw_version"),
        F.min("_ts_min").alias("first_ts"),
        F.max("_ts_max").alias("last_ts"),
        F.sum("records").alias("records"),
        F.sum("distinct_seq").alias("distinct_seq"),
        F.min("min_seq").alias("min_seq"),
        F.max("max_seq").alias("max_seq"),
        F.max_by("period_s", "max_seq").alias("period_s"),
        F.sum("unexpected_resets").alias("unexpected_resets"),
        (F.max_by("_rec_last", "max_seq") - F.min_by("_rec_first", "min_seq")).alias("reconnects"),
        F.min("_vbat_min").alias("vbat_min"),
        F.sum(n).alias("_n"),
        F.sum(F.col("_vt") + n * c).alias("_st"),
        F.sum("_vv").alias("_sv"),
        F.sum(F.col("_vtv") + c * F.col("_vv")).alias("_stv"),
        F.sum(F.col("_vtt") + 2 * c * F.col("_vt") + n * c * c).alias("_stt"),
    )
    sxx = F.col("_stt") - F.col("_st") * F.col("_st") / F.col("_n")
    sxy = F.col("_stv") - F.col("_st") * F.col("_sv") / F.col("_n")
    d = d.withColumn("vbat_drop_per_hour", F.when((F.col("_n") > 1) & (sxx > 0), -sxy / sxx))
    b = boot.groupBy("device_id").agg(
        F.count(F.lit(1)).alias("_boots"), F.sum("sxy").alias("_sxy"), F.sum("sxx").alias("_sxx")
    )
    hrs = (
        hours_fw.groupBy("device_id", "hour_ms")
        .agg(F.max("crashed").alias("crashed"))
        .groupBy("device_id")
        .agg(F.count(F.lit(1)).alias("active_hours"), F.sum(1 - F.col("crashed")).alias("crash_free_hours"))
    )
    d = d.join(b, "device_id").join(hrs, "device_id")
    if newest_ts is None:
        d = d.crossJoin(F.broadcast(win.agg(F.max("_ts_max").alias("_newest"))))
    else:
        d = d.withColumn("_newest", F.lit(int(newest_ts)).cast("long"))
    expected = F.round((F.col("last_ts") - F.col("first_ts")) / (F.col("period_s") * 1000.0)) + 1
    return d.select(
        "device_id",
        "fw_version",
        F.timestamp_millis("first_ts").alias("first_seen"),
        F.timestamp_millis("last_ts").alias("last_seen"),
        ((F.col("_newest") - F.col("last_ts")) >= silent_after_s * 1000).alias("silent"),
        "records",
        "distinct_seq",
        "min_seq",
        "max_seq",
        "period_s",
        (F.col("distinct_seq") / expected).alias("coverage"),
        (1 - F.col("distinct_seq") / (F.col("max_seq") - F.col("min_seq") + 1)).alias("loss_rate"),
        (F.col("_boots") - 1).alias("reboots"),
        "unexpected_resets",
        "active_hours",
        "crash_free_hours",
        (100.0 * F.col("crash_free_hours") / F.col("active_hours")).alias("crash_free_hours_pct"),
        "reconnects",
        (F.col("reconnects") / F.col("active_hours")).alias("reconnects_per_hour"),
        F.when(F.col("_sxx") > 0, -F.col("_sxy") / F.col("_sxx")).alias("heap_leak_bytes_per_hour"),
        "vbat_min",
        "vbat_drop_per_hour",
    )


def version_key(col="fw_version"):
    """Numeric dot-separated order: 1.10.0 after 1.9.2; a part without leading digits is -1."""
    return F.expr(
        "transform(split(%s, '[.]'), p -> coalesce(try_cast(regexp_extract(p, '^([0-9]+)', 1) "
        "as int), -1))" % col
    )


def firmware_cohort(clean, win, hours_fw):
    hrs = hours_fw.groupBy("fw_version").agg(
        F.countDistinct("device_id").alias("devices"),
        F.count(F.lit(1)).alias("device_hours"),
        F.sum(1 - F.col("crashed")).alias("crash_free_hours"),
        F.sum("records").alias("records"),
        F.sum("unexpected_resets").alias("unexpected_resets"),
    )
    rssi = release_percentiles(clean, "rssi", {"rssi_p05": 0.05, "rssi_p50": 0.5})
    lat = release_percentiles(clean, "publish_latency_ms", {"latency_p50": 0.5, "latency_p95": 0.95})
    ws = win.groupBy("fw_version").agg(
        F.avg("coverage").alias("mean_coverage"),
        F.avg("loss_rate").alias("mean_loss_rate"),
        F.sum("reconnects").alias("reconnects"),
    )
    c = (
        hrs.join(rssi, "fw_version", "left")
        .join(lat, "fw_version", "left")
        .join(ws, "fw_version", "left")
        .withColumn("crash_free_hours_pct", 100.0 * F.col("crash_free_hours") / F.col("device_hours"))
        .withColumn("reconnects_per_device_hour", F.col("reconnects") / F.col("device_hours"))
    )
    order = Window.orderBy(version_key(), "fw_version")
    c = (
        c.withColumn("prev_fw_version", F.lag("fw_version").over(order))
        .withColumn(
            "crash_free_hours_pct_delta",
            F.col("crash_free_hours_pct") - F.lag("crash_free_hours_pct").over(order),
        )
        .withColumn("mean_loss_rate_delta", F.col("mean_loss_rate") - F.lag("mean_loss_rate").over(order))
    )
    return c.select(
        "fw_version",
        "devices",
        "device_hours",
        "crash_free_hours",
        "crash_free_hours_pct",
        "records",
        "rssi_p05",
        "rssi_p50",
        "latency_p50",
        "latency_p95",
        "mean_coverage",
        "mean_loss_rate",
        "reconnects",
        "reconnects_per_device_hour",
        "unexpected_resets",
        "prev_fw_version",
        "crash_free_hours_pct_delta",
        "mean_loss_rate_delta",
    )


def outliers(health, z=S.OUTLIER_Z, min_cohort=S.MIN_COHORT):
    m = health.select(
        "device_id",
        "fw_version",
        F.explode(
            F.array(
                *[
                    F.struct(F.lit(k).alias("metric"), F.col(k).cast("double").alias("value"))
                    for k in S.OUTLIER_METRICS
                ]
            )
        ).alias("_m"),
    ).select("device_id", "fw_version", "_m.*")
    m = m.filter(F.col("value").isNotNull() & ~F.isnan("value"))
    med = m.groupBy("fw_version", "metric").agg(
        F.percentile("value", 0.5).alias("cohort_median"), F.count(F.lit(1)).alias("cohort_devices")
    )
    j = m.join(med, ["fw_version", "metric"]).withColumn(
        "_ad", F.abs(F.col("value") - F.col("cohort_median"))
    )
    spread = j.groupBy("fw_version", "metric").agg(
        F.percentile("_ad", 0.5).alias("cohort_mad"), F.avg("_ad").alias("_meanad")
    )
    j = j.join(spread, ["fw_version", "metric"])
    dev = F.col("value") - F.col("cohort_median")
    score = F.when(F.col("cohort_mad") > 0, dev / (1.4826 * F.col("cohort_mad"))).when(
        F.col("_meanad") > 0, dev / (1.2533 * F.col("_meanad"))
    )
    return (
        j.withColumn("score", score)
        .filter((F.col("cohort_devices") >= min_cohort) & (F.col("score") > z))
        .select(
            "device_id",
            "fw_version",
            "metric",
            "value",
            "cohort_median",
            "cohort_mad",
            "cohort_devices",
            "score",
        )
    )


def stats(deduped):
    """The job's one pass over the deduplicated records before the tables (it also fills the cache):
    per _problem, delivered records (`n`), kept records (`kept`) and the ts range (`ts_min`, `ts_max`)."""
    return (
        deduped.groupBy("_problem")
        .agg(
            F.sum("copies").alias("n"),
            F.count(F.lit(1)).alias("kept"),
            F.min("ts").alias("ts_min"),
            F.max("ts").alias("ts_max"),
        )
        .collect()
    )


def build(classified, partitions=8, silent_after_s=S.SILENT_AFTER_S, min_cohort=S.MIN_COHORT, z=S.OUTLIER_Z):
    """All tables as lazy DataFrames, the cached intermediates (to unpersist after) and the
    rows of stats() (computed here: the newest ts and the first window are literals in the tables).

    The records are shuffled once, by device_id (dedup); the windows, boots and device-hours are
    grouped within those partitions and device_health joins them there, so only small
    aggregates (per release, per cohort) move again."""
    deduped = dedup(classified, partitions).persist(StorageLevel.MEMORY_AND_DISK)
    rows = stats(deduped)
    valid = [r for r in rows if r["_problem"] is None]
    newest = valid[0]["ts_max"] if valid else None
    first_window = None if not valid else valid[0]["ts_min"] - valid[0]["ts_min"] % (S.WINDOW_S * 1000)
    clean = clean_records(deduped)
    win = windows(clean).persist(StorageLevel.MEMORY_AND_DISK)
    hours_fw = hours_by_release(clean).persist(StorageLevel.MEMORY_AND_DISK)
    health = device_health(win, boots(clean), hours_fw, silent_after_s, first_window, newest).persist(
        StorageLevel.MEMORY_AND_DISK
    )
    tables = {
        "clean": clean.drop("window_ms", "hour_ms", "unexpected"),
        "device_window": win.select(*WINDOW_COLUMNS),
        "device_health": health,
        "firmware_cohort": firmware_cohort(clean, win, hours_fw),
        "outliers": outliers(health, z, min_cohort),
    }
    return (
        tables,
        {"deduped": deduped, "clean": clean, "win": win, "hours_fw": hours_fw, "health": health},
        rows,
    )

"""The metric definitions, in Spark. Every table is a function of the deduplicated records.

Definitions (docs/reference/tables.md repeats them):
  clean           valid records, one per (device_id, seq): the copy with the lowest rx_ts is kept;
                  `copies` says how many were delivered. Partitioned by `date` and `hour` (UTC, of ts).
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
                    previous window's (by min_seq) last record (the window's first record for its
                    first window)
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

How it is computed: the records are shuffled once, by device_id, and deduplicated; the windows
are aggregated from them; everything per device or per release is then merged from three small
partial aggregates per UTC hour, which the incremental run keeps and recomputes only for the hours
its new files touch:
  hour_windows    (device_id, hour_ms, window fw_version): sums, extremes and regression moments of
                  the hour's windows, and the links (first/last min_seq, last counter) that chain a
                  device's windows across hours
  hour_records    (device_id, hour_ms, record fw_version, boot_id): records, crashes, heap moments
  histogram       (hour_ms, fw_version, metric, value): record counts, for the release percentiles
"""

from pyspark.sql import Window
from pyspark.sql import functions as F

from fleetwire.host.analytics import schema as S

BIG = 2**63 - 1
HOUR_MS = 3600_000
KEY = ["device_id", "seq"]
# The record's string fields besides device_id: grouping keys of the deduplication (a hash aggregate
# cannot hold a string in its buffer; min_by of a struct made Spark sort every record instead).
STRINGS = [f for f, k in S.FIELDS if k == "string" and f != "device_id"]
FIXED = [f for f, k in S.FIELDS if k != "string" and f not in KEY]
HIST_METRICS = {"rssi": "rssi", "latency": "publish_latency_ms"}


def dedup(classified, partitions=None):
    """One row per (device_id, seq, _problem, fw_version, reset_cause) with `copies` and, for the
    other fields, the values of the copy with the lowest rx_ts (every min_by compares the same key,
    so they all take the same copy). Copies of a record differ only in rx_ts, so this is one row per
    (device_id, seq, _problem); stats() counts the keys with more than one row (deliveries that
    disagree on a string field), and the job then runs dedup_exact instead.
    With `partitions`, the records are first hash-partitioned by device_id: every later grouping
    starts with device_id, so this is the job's one shuffle of records."""
    if partitions:
        classified = classified.repartition(int(partitions), "device_id")
    key = F.coalesce(F.col("rx_ts"), F.lit(BIG))
    return classified.groupBy(*KEY, "_problem", *STRINGS).agg(
        F.count(F.lit(1)).alias("copies"), *[F.min_by(c, key).alias(c) for c in FIXED]
    )


def dedup_exact(classified, partitions=None):
    """dedup() for input whose deliveries of one (device_id, seq) disagree: the whole copy with the
    lowest rx_ts (min_by of a struct: Spark sorts every record for it, hence only when needed)."""
    if partitions:
        classified = classified.repartition(int(partitions), "device_id")
    rest = STRINGS + FIXED
    key = F.coalesce(F.col("rx_ts"), F.lit(BIG))
    g = classified.groupBy(*KEY, "_problem").agg(
        F.count(F.lit(1)).alias("copies"), F.min_by(F.struct(*rest), key).alias("_r")
    )
    return g.select(
        *KEY,
        "_problem",
        *[F.col("_r." + c).alias(c) for c in STRINGS],
        "copies",
        *[F.col("_r." + c).alias(c) for c in FIXED],
    )


def stats(deduped, per_hour=False):
    """The one pass over the deduplicated records before the tables (it also fills the cache), to
    collect: per _problem (and UTC hour of ts, `hour_ms`), delivered records (`n`), distinct keys
    (`kept`), keys with disagreeing deliveries (`conflicts`) and the ts range (`ts_min`, `ts_max`)."""
    by = ["_problem"] + (["hour_ms"] if per_hour else [])
    per_key = deduped.groupBy(*KEY, "_problem").agg(
        F.sum("copies").alias("n"),
        F.count(F.lit(1)).alias("variants"),
        F.min("ts").alias("ts_min"),
        F.max("ts").alias("ts_max"),
    )
    if per_hour:  # copies of a record share its ts, so a key's hour is its first copy's
        per_key = per_key.withColumn("hour_ms", F.col("ts_min") - F.pmod(F.col("ts_min"), F.lit(HOUR_MS)))
    return per_key.groupBy(*by).agg(
        F.sum("n").alias("n"),
        F.count(F.lit(1)).alias("kept"),
        F.sum(F.when(F.col("variants") > 1, 1).otherwise(0)).alias("conflicts"),
        F.min("ts_min").alias("ts_min"),
        F.max("ts_max").alias("ts_max"),
    )


def with_time_columns(df, ts="ts"):
    """hour_ms, and the partition columns date and hour (UTC) of a millisecond timestamp."""
    return df.withColumns(time_columns(ts))


def time_columns(ts="ts"):
    """{name: column} of with_time_columns(), to add with other columns in one projection (each
    withColumn is one more plan for Spark to analyse on the driver)."""
    t = F.col(ts)
    return {
        "hour_ms": t - F.pmod(t, F.lit(HOUR_MS)),
        "date": F.to_date(F.timestamp_millis(t)),
        "hour": F.pmod(F.floor(t / HOUR_MS), F.lit(24)).cast("int"),
    }


def clean_records(deduped):
    """The valid, deduplicated records with the derived columns the tables group by."""
    ts = F.col("ts")
    c = deduped.filter(F.col("_problem").isNull()).select(*S.FIELD_NAMES, "copies")
    return c.withColumns(
        {
            "window_ms": ts - F.pmod(ts, F.lit(S.WINDOW_S * 1000)),
            **time_columns(),
            "unexpected": F.when(
                F.col("reset_cause").isNotNull() & ~F.col("reset_cause").isin(*S.EXPECTED_RESETS), 1
            ).otherwise(0),
        }
    )


CLEAN_COLUMNS = S.FIELD_NAMES + ["copies", "date", "hour"]


def _nearest_rank(sorted_col, p):
    # the ceil(p*n)-th smallest of a window's few values (as percentile_disc, which sorts
    # through a generic aggregate and cost more than the rest of the window together)
    n = F.size(sorted_col)
    k = F.greatest(F.lit(1), F.ceil(F.lit(p) * n - F.lit(1e-9))).cast("int")
    return F.when(n > 0, F.element_at(sorted_col, k))


def windows(clean):
    """device_window without `reconnects` (link() adds it), with the private columns (prefixed _)
    that hour_windows() sums."""
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
    return w.withColumns(
        {
            "latency_p50": _nearest_rank("_lat", 0.5),
            "latency_p95": _nearest_rank("_lat", 0.95),
            "dup_records": F.col("records") - F.col("distinct_seq"),
            "coverage": F.col("distinct_seq") / (F.lit(float(S.WINDOW_S)) / F.col("period_s")),
            "loss_rate": 1 - F.col("distinct_seq") / (F.col("max_seq") - F.col("min_seq") + 1),
            "heap_delta": F.col("_heap_last") - F.col("_heap_first"),
            "window_start": F.timestamp_millis(F.col("window_ms")),
            **time_columns("window_ms"),
        }
    ).drop("_lat")


def link(win, before=None):
    """Add `reconnects`: the window's last counter minus the previous window's (by min_seq) last
    counter, or minus its own first counter when it has none. `before` (incremental runs): rows
    (device_id, min_seq, _rec_last) standing for windows not in `win` (each hour's last window),
    so that the first window of `win` on a device chains to what came before it."""
    order = Window.partitionBy("device_id").orderBy("min_seq")
    if before is None:
        return win.withColumn(
            "reconnects", F.col("_rec_last") - F.coalesce(F.lag("_rec_last").over(order), F.col("_rec_first"))
        )
    ours = win.select("device_id", "window_ms", "min_seq", "_rec_last", F.lit(True).alias("_ours"))
    theirs = before.select(
        "device_id",
        F.lit(None).cast("long").alias("window_ms"),
        "min_seq",
        "_rec_last",
        F.lit(False).alias("_ours"),
    )
    prev = (
        ours.unionByName(theirs)
        .withColumn("_prev", F.lag("_rec_last").over(order))
        .filter("_ours")
        .select("device_id", "window_ms", "_prev")
    )
    return (
        win.join(prev, ["device_id", "window_ms"])
        .withColumn("reconnects", F.col("_rec_last") - F.coalesce(F.col("_prev"), F.col("_rec_first")))
        .drop("_prev")
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
    "date",
    "hour",
]


# Each window as a row of hour_windows(): (its column there, the window's column it is). The job
# caches of link(windows(...)) only these and the table's columns (WINDOW_KEPT): at 10M records a
# cache of every column cost 0.7 s more of device_window's 13-14 s (warm JVM)
HOUR_FROM_WINDOW = [
    ("device_id", "device_id"),
    ("hour_ms", "window_ms"),
    ("fw_version", "fw_version"),
    ("coverage_sum", "coverage"),
    ("loss_rate_sum", "loss_rate"),
    ("reconnects_sum", "reconnects"),
    *[(c, c) for c in ("records", "distinct_seq", "min_seq", "max_seq", "period_s", "unexpected_resets")],
    ("rec_first", "_rec_first"),
    ("rec_last", "_rec_last"),
    ("last_min_seq", "min_seq"),
    ("last_rec", "_rec_last"),
    *[(c, "_" + c) for c in ("ts_min", "ts_max", "vbat_min", "vn", "vt", "vv", "vtv", "vtt")],
]
WINDOW_KEPT = list(dict.fromkeys(WINDOW_COLUMNS + [w for _, w in HOUR_FROM_WINDOW]))


def hour_windows(win):
    """Per (device, UTC hour, window fw_version): what device_health and firmware_cohort need of the
    hour's windows, in a form that sums across hours: each window as a partial row of its own (its
    battery moments about the window's start), merged into its hour as merge_windows merges hours."""
    one = win.select(*[F.col(w).alias(h) for h, w in HOUR_FROM_WINDOW], F.lit(1).alias("windows"))
    return merge_windows(one, HOUR_MS)


def hour_records(clean):
    """Per (device, UTC hour, record fw_version, boot): records, unexpected resets, whether one
    happened, and the moments of heap_free on uptime (hours) for the leak slope: count, means and
    co-moments about the means (Spark's covariance keeps them exact where raw sums of products of
    ~1e4 bytes and ~1e3 hours lose the slope of a steady heap to rounding)."""
    ok = F.col("uptime_s").isNotNull() & F.col("heap_free").isNotNull()
    u = F.when(ok, F.col("uptime_s") / 3600.0)
    h = F.when(ok, F.col("heap_free").cast("double"))
    return clean.groupBy("device_id", "hour_ms", "fw_version", "boot_id").agg(
        F.count(F.lit(1)).alias("records"),
        F.sum("unexpected").alias("unexpected_resets"),
        F.max("unexpected").alias("crashed"),
        F.count(u).alias("hn"),
        F.avg(u).alias("hu"),
        F.avg(h).alias("hh"),
        (F.covar_pop(u, h) * F.count(u)).alias("huh"),
        (F.var_pop(u) * F.count(u)).alias("huu"),
    )


def histogram(clean, by_hour=True):
    """Records per (hour_ms, fw_version, metric, value) for the metrics whose release percentiles
    firmware_cohort reports (rssi, latency); without by_hour, summed over the hours."""
    keys = (["hour_ms"] if by_hour else []) + ["fw_version"]
    pairs = ", ".join("'%s', cast(%s as double)" % kv for kv in HIST_METRICS.items())
    v = clean.select(*keys, F.expr("stack(%d, %s) as (metric, value)" % (len(HIST_METRICS), pairs)))
    return (
        v.filter(F.col("value").isNotNull())
        .groupBy(*keys, "metric", "value")
        .agg(F.count(F.lit(1)).alias("n"))
    )


PERCENTILES = {
    "rssi": {"rssi_p05": 0.05, "rssi_p50": 0.5},
    "latency": {"latency_p50": 0.5, "latency_p95": 0.95},
}


def release_percentiles(hist):
    """Nearest-rank percentiles (PERCENTILES) per fw_version: the ceil(p*n)-th smallest value of a
    metric, n the release's values, from the histogram's running count. One shuffle (by
    fw_version): the sums, the running count and the pivot all group within it."""
    from fractions import Fraction

    h = hist.repartition("fw_version").groupBy("fw_version", "metric", "value").agg(F.sum("n").alias("_n"))
    run = (
        Window.partitionBy("fw_version", "metric")
        .orderBy("value")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    h = h.withColumn("_cum", F.sum("_n").over(run)).withColumn(
        "_tot", F.sum("_n").over(Window.partitionBy("fw_version", "metric"))
    )
    aggs = []
    for metric, ps in PERCENTILES.items():
        for name, p in ps.items():
            f = Fraction(str(p))
            k = F.expr("(%d * _tot + %d) div %d" % (f.numerator, f.denominator - 1, f.denominator))
            aggs.append(
                F.min(F.when((F.col("metric") == metric) & (F.col("_cum") >= k), F.col("value"))).alias(name)
            )
    return h.groupBy("fw_version").agg(*aggs)


def window_moments(n, c):
    """The battery moments (vn, vt, vv, vtv, vtt) of partial rows shifted by c hours (to an origin c
    hours before theirs): as sums, they then add up with rows of other origins."""
    return {
        "vt": F.col("vt") + n * c,
        "vtv": F.col("vtv") + c * F.col("vv"),
        "vtt": F.col("vtt") + 2 * c * F.col("vt") + n * c * c,
    }


def merge_windows(hw, bucket_ms):
    """hour_windows rows merged into buckets of bucket_ms (the incremental run's daily rollups): per
    (device, bucket start as hour_ms, window fw_version), what device_health and firmware_cohort read,
    and the bucket's last window (last_min_seq, last_rec) that a later one chains to. Merging them
    again gives what merging the hours gives."""
    start = F.col("hour_ms") - F.pmod(F.col("hour_ms"), F.lit(int(bucket_ms)))
    c = F.pmod(F.col("hour_ms"), F.lit(int(bucket_ms))) / float(HOUR_MS)
    m = window_moments(F.col("vn"), c)
    return hw.groupBy("device_id", start.alias("hour_ms"), "fw_version").agg(
        F.sum("windows").alias("windows"),
        F.sum("coverage_sum").alias("coverage_sum"),
        F.sum("loss_rate_sum").alias("loss_rate_sum"),
        F.sum("reconnects_sum").alias("reconnects_sum"),
        F.sum("records").alias("records"),
        F.sum("distinct_seq").alias("distinct_seq"),
        F.min("min_seq").alias("min_seq"),
        F.max("max_seq").alias("max_seq"),
        F.max_by("period_s", "max_seq").alias("period_s"),
        F.sum("unexpected_resets").alias("unexpected_resets"),
        F.min_by("rec_first", "min_seq").alias("rec_first"),
        F.max_by("rec_last", "max_seq").alias("rec_last"),
        F.max("last_min_seq").alias("last_min_seq"),
        F.max_by("last_rec", "last_min_seq").alias("last_rec"),
        F.min("ts_min").alias("ts_min"),
        F.max("ts_max").alias("ts_max"),
        F.min("vbat_min").alias("vbat_min"),
        F.sum("vn").alias("vn"),
        F.sum(m["vt"]).alias("vt"),
        F.sum("vv").alias("vv"),
        F.sum(m["vtv"]).alias("vtv"),
        F.sum(m["vtt"]).alias("vtt"),
    )


def merge_records(hr, keys):
    """hour_records rows merged per `keys`: sums, and the heap moments of the merged groups combined
    about their common means (Chan et al.'s pairwise formula), in the same form, so that merging
    merged rows again gives what merging the hours gives."""
    w = Window.partitionBy(*keys)
    n = F.sum("hn").over(w)
    b = hr.withColumns(
        {
            "_mu": F.sum(F.col("hn") * F.coalesce("hu", F.lit(0.0))).over(w) / n,
            "_mh": F.sum(F.col("hn") * F.coalesce("hh", F.lit(0.0))).over(w) / n,
        }
    )
    du, dh = F.col("hu") - F.col("_mu"), F.col("hh") - F.col("_mh")
    has = F.col("hn") > 0
    return b.groupBy(*keys).agg(
        F.sum("records").alias("records"),
        F.sum("unexpected_resets").alias("unexpected_resets"),
        F.max("crashed").alias("crashed"),
        F.sum("hn").alias("hn"),
        F.max("_mu").alias("hu"),  # one value per group (null without any: 0 / 0)
        F.max("_mh").alias("hh"),
        F.sum(F.when(has, F.col("huh") + F.col("hn") * du * dh).otherwise(0.0)).alias("huh"),
        F.sum(F.when(has, F.col("huu") + F.col("hn") * du * du).otherwise(0.0)).alias("huu"),
    )


def hour_counts(hr, bucket_ms=None):
    """From hour_records rows: (per device and record fw_version: device_hours, crash_free_hours,
    records, unexpected_resets; per device: active_hours, crash_free_hours), counted per bucket of
    bucket_ms (rows that sum across buckets) or over all hours."""
    b = []
    if bucket_ms is not None:
        b = [(F.col("hour_ms") - F.pmod("hour_ms", F.lit(int(bucket_ms)))).alias("hour_ms")]
    fw = (
        hr.groupBy("device_id", "hour_ms", "fw_version")
        .agg(
            F.max("crashed").alias("crashed"),
            F.sum("records").alias("records"),
            F.sum("unexpected_resets").alias("unexpected_resets"),
        )
        .groupBy("device_id", *b, "fw_version")
        .agg(
            F.count(F.lit(1)).alias("device_hours"),
            F.sum(1 - F.col("crashed")).alias("crash_free_hours"),
            F.sum("records").alias("records"),
            F.sum("unexpected_resets").alias("unexpected_resets"),
        )
    )
    dev = (
        hr.groupBy("device_id", "hour_ms")
        .agg(F.max("crashed").alias("crashed"))
        .groupBy("device_id", *b)
        .agg(F.count(F.lit(1)).alias("active_hours"), F.sum(1 - F.col("crashed")).alias("crash_free_hours"))
    )
    return fw, dev


def boot_moments(per_boot, top=False):
    """From merge_records rows by (device_id, boot_id): per device, its boots (_boots) and the sums of
    their co-moments of heap_free on uptime, each about its own boot's means (_sxy, _sxx); top: and
    the highest boot_id (_top)."""
    return per_boot.groupBy("device_id").agg(
        F.count(F.lit(1)).alias("_boots"),
        F.sum("huh").alias("_sxy"),
        F.sum("huu").alias("_sxx"),
        *([F.max("boot_id").alias("_top")] if top else []),
    )


def device_health(hw, boots, dev_hours, silent_after_s, newest_ts, first_hour_ms):
    """device_health from the partials: hw (hour_windows or merge_windows rows), boots (boot_moments()),
    dev_hours (hour_counts()[1]). newest_ts: the newest ts in the data; first_hour_ms: the first hour
    in it (the battery moments are shifted to it, hours since)."""
    c = (F.col("hour_ms") - F.lit(int(first_hour_ms))) / float(HOUR_MS)
    n = F.col("vn")
    m = window_moments(n, c)
    d = hw.groupBy("device_id").agg(
        F.max_by("fw_version", "max_seq").alias("fw_version"),
        F.min("ts_min").alias("first_ts"),
        F.max("ts_max").alias("last_ts"),
        F.sum("records").alias("records"),
        F.sum("distinct_seq").alias("distinct_seq"),
        F.min("min_seq").alias("min_seq"),
        F.max("max_seq").alias("max_seq"),
        F.max_by("period_s", "max_seq").alias("period_s"),
        F.sum("unexpected_resets").alias("unexpected_resets"),
        (F.max_by("rec_last", "max_seq") - F.min_by("rec_first", "min_seq")).alias("reconnects"),
        F.min("vbat_min").alias("vbat_min"),
        F.sum(n).alias("_n"),
        F.sum(m["vt"]).alias("_st"),
        F.sum("vv").alias("_sv"),
        F.sum(m["vtv"]).alias("_stv"),
        F.sum(m["vtt"]).alias("_stt"),
    )
    sxx = F.col("_stt") - F.col("_st") * F.col("_st") / F.col("_n")
    sxy = F.col("_stv") - F.col("_st") * F.col("_sv") / F.col("_n")
    d = d.withColumn("vbat_drop_per_hour", F.when((F.col("_n") > 1) & (sxx > 0), -sxy / sxx))
    hrs = dev_hours.groupBy("device_id").agg(
        F.sum("active_hours").alias("active_hours"), F.sum("crash_free_hours").alias("crash_free_hours")
    )
    d = d.join(boots, "device_id").join(hrs, "device_id")
    expected = F.round((F.col("last_ts") - F.col("first_ts")) / (F.col("period_s") * 1000.0)) + 1
    return d.select(
        "device_id",
        "fw_version",
        F.timestamp_millis("first_ts").alias("first_seen"),
        F.timestamp_millis("last_ts").alias("last_seen"),
        ((F.lit(int(newest_ts)) - F.col("last_ts")) >= silent_after_s * 1000).alias("silent"),
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
    """Releases in the order a board takes them (fleetwire.ota.trust.older): the dot-separated
    numbers (1.10.0 after 1.9.2; a part without leading digits is -1), then a pre-release
    (2.0.0-rc1) before its release, pre-releases by their tags' runs of digits as numbers and of
    letters as words (rc9 before rc10, beta.2 before beta.11), a number before a word; build
    metadata (+...) is not ordered."""
    v = "split(regexp_replace(%s, '[+].*$', ''), '-', 2)" % col
    nums = (
        "transform(split(%s[0], '[.]'), "
        "p -> coalesce(try_cast(regexp_extract(p, '^([0-9]+)', 1) as int), -1))"
    )
    tag = (
        "transform(regexp_extract_all(coalesce(try_element_at(%s, 2), ''), '([0-9]+|[^0-9.]+)', 1), "
        "t -> named_struct('word', t rlike '^[^0-9]', 'num', coalesce(try_cast(t as bigint), 0), 'text', t))"
    )
    return F.expr("named_struct('n', %s, 'release', size(%s) = 1, 'tag', %s)" % (nums % v, v, tag % v))


def firmware_cohort(fw_hours, hist, hw):
    # per (device, release) first (fw_hours: hour_counts()[0]), within the partitions by device_id;
    # then one shuffle by release for the record-based and the window-based sums together
    dev = fw_hours.groupBy("device_id", "fw_version").agg(
        F.lit(1).alias("devices"),
        F.sum("device_hours").alias("device_hours"),
        F.sum("crash_free_hours").alias("crash_free_hours"),
        F.sum("records").alias("records"),
        F.sum("unexpected_resets").alias("unexpected_resets"),
    )
    win = hw.groupBy("device_id", "fw_version").agg(
        F.sum("windows").alias("windows"),
        F.sum("coverage_sum").alias("coverage_sum"),
        F.sum("loss_rate_sum").alias("loss_rate_sum"),
        F.sum("reconnects_sum").alias("reconnects"),
    )
    both = dev.unionByName(win, allowMissingColumns=True)
    c = both.groupBy("fw_version").agg(
        F.sum("devices").alias("devices"),
        F.sum("device_hours").alias("device_hours"),
        F.sum("crash_free_hours").alias("crash_free_hours"),
        F.sum("records").alias("records"),
        F.sum("unexpected_resets").alias("unexpected_resets"),
        (F.sum("coverage_sum") / F.sum("windows")).alias("mean_coverage"),
        (F.sum("loss_rate_sum") / F.sum("windows")).alias("mean_loss_rate"),
        F.sum("reconnects").alias("reconnects"),
    )
    # a release seen only in windows' fw_version (never as a record's) has no device-hours: as before,
    # the cohort lists the releases of the records
    c = (
        c.filter(F.col("devices").isNotNull())
        .join(release_percentiles(hist), "fw_version", "left")
        .withColumns(
            {
                "crash_free_hours_pct": 100.0 * F.col("crash_free_hours") / F.col("device_hours"),
                "reconnects_per_device_hour": F.col("reconnects") / F.col("device_hours"),
            }
        )
    )
    order = Window.orderBy(version_key(), "fw_version")
    c = c.withColumns(  # one window over the releases for the three lags
        {
            "prev_fw_version": F.lag("fw_version").over(order),
            "crash_free_hours_pct_delta": F.col("crash_free_hours_pct")
            - F.lag("crash_free_hours_pct").over(order),
            "mean_loss_rate_delta": F.col("mean_loss_rate") - F.lag("mean_loss_rate").over(order),
        }
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
    # one shuffle, by release: the medians, the deviations and both joins stay within it
    m = m.filter(F.col("value").isNotNull() & ~F.isnan("value")).repartition("fw_version")
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


def fleet_hourly(hw):
    """Per UTC hour and window fw_version: mean coverage and loss over the windows, devices (for the
    report)."""
    return hw.groupBy("hour_ms", "fw_version").agg(
        (F.sum("coverage_sum") / F.sum("windows")).alias("mean_coverage"),
        (F.sum("loss_rate_sum") / F.sum("windows")).alias("mean_loss_rate"),
        F.countDistinct("device_id").alias("devices"),
    )

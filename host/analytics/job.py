"""The `fleetwire report` job: landing zone -> Parquet tables (+ report.html, quality.json).

Batch: read every file of the landing zone (or those from --since on) and rebuild the tables.
Incremental (incremental.py): read only the files not seen before and recompute only the hours
they touch. Every path is a Hadoop URI (file:, hdfs:, s3a:, ...) and every output, the small
files included, is written where the tables go (storage.py).
"""

import json
import time
from dataclasses import dataclass, field

from pyspark import StorageLevel
from pyspark.sql import Row
from pyspark.sql import functions as F

from fleetwire.host.analytics import landing, metrics, session, storage
from fleetwire.host.analytics import schema as S

# PySpark's MEMORY_AND_DISK is the serialized level: each cached block of column batches is written
# with Java serialization and compressed with LZ4 (as this Spark does unless spark.rdd.compress=false).
# Of the ways measured at 10M records it is the fastest (bench/README.md, "The Spark job's cache"):
# deserialized blocks (MEMORY_AND_DISK_DESER, DataFrame.persist()'s default) doubled the kernel's
# share and device_health's time; without LZ4 the job took a third longer (four times the kernel
# time: larger blocks), and Spark's columnar compression instead of LZ4 costs more CPU when the cache
# is filled.
CACHE = StorageLevel.MEMORY_AND_DISK
HOUR_MS = metrics.HOUR_MS


@dataclass
class Config:
    input: str
    out: str
    fmt: str = "ndjson"
    since_ms: int = None
    incremental: bool = False
    checkpoint: str = None  # default OUT/_checkpoint
    reset: bool = False  # incremental: forget what earlier runs saw first (this run reads everything)
    silent_after_s: int = S.SILENT_AFTER_S
    min_cohort: int = S.MIN_COHORT
    partitions: int = None  # default: from the cluster's cores and the input's size (session.tune)
    report: bool = True
    symbols: str = None  # a directory of release symbol maps (crashes.py), local
    log: object = field(default=print, repr=False)


@dataclass
class Result:
    out: str
    tables: dict  # name -> Parquet directory (URI)
    quality: dict
    seconds: float
    report: str = None
    new_records: int = None  # incremental: usable records in files not seen before
    new_files: int = None
    hours: list = None  # incremental: the hours (epoch ms) whose partitions it rewrote


@dataclass
class Paths:
    input: str
    out: str
    checkpoint: str

    def table(self, name):
        return storage.join(self.out, name)


def run(spark, cfg):
    """Run the job in this session. Raises landing.InputError for input it cannot use (and its
    subclass storage.SchemeError for a URI no filesystem on the classpath serves)."""
    session.prepare(spark)
    t0 = time.time()
    store = storage.Storage(spark)
    p = Paths(store.qualify(cfg.input, "--input"), store.qualify(cfg.out, "--out"), None)
    p.checkpoint = store.qualify(cfg.checkpoint or storage.join(p.out, "_checkpoint"), "--checkpoint")
    if cfg.incremental:
        from fleetwire.host.analytics import incremental

        if cfg.reset:
            cfg.log("incremental: forgetting what earlier runs saw (%s, _staging, _state)" % p.checkpoint)
            incremental.reset(store, p.out, p.checkpoint)
        res = incremental.run(spark, store, cfg, p)
    else:
        res = batch(spark, store, cfg, p)
    res.seconds = time.time() - t0
    return res


def read_records(spark, store, files, cfg, action):
    """action(classified records of `files`) -> its result, files read, files that vanished.
    A file that is listed but gone when a task opens it fails the read (Spark is told not to skip
    it): it is left out, counted, and the action runs again without it."""
    files, vanished = list(files), []
    while True:
        try:
            return (
                action(landing.classify(landing.read(spark, files, cfg.fmt), cfg.since_ms)),
                files,
                vanished,
            )
        except Exception as e:  # noqa: BLE001 - only a vanished file is handled here
            if not landing.is_missing_file(e):
                raise
            gone = [f for f in files if not store.exists(f)]
            if not gone:
                raise
            for f in gone:
                cfg.log("warning: %s vanished between listing and reading; left out" % f)
            vanished += gone
            files = [f for f in files if f not in gone]
            if not files:
                raise landing.InputError(
                    "every file listed under %s vanished before it could be read" % cfg.input
                )


def scan(store, cfg, p, since_ms):
    files, unreadable, size = landing.scan(p.input, cfg.fmt, since_ms, store)
    for path, why in unreadable:
        cfg.log("warning: skipping unreadable file %s (%s)" % (path, why))
    return files, unreadable, size


def deduplicate(classified, parts, per_hour=False, also=()):
    """The deduplicated records, cached and counted: (DataFrame, metrics.stats rows), then the rows of
    each DataFrame in `also` (small ones, collected in the same Spark job as the counts)."""
    cand = metrics.dedup(classified, parts).persist(CACHE)
    try:
        rows, *more = collect_together(metrics.stats(cand, per_hour), *also)
        if sum(r["conflicts"] for r in rows):  # deliveries of one record that disagree: exact path
            cand.unpersist()
            cand = metrics.dedup_exact(classified, parts).persist(CACHE)
            rows = metrics.stats(cand, per_hour).collect()
    except BaseException:
        cand.unpersist()
        raise
    return (cand, rows, *more)


def collect_together(*dfs):
    """The rows of each of some small DataFrames, collected in one Spark job: their stages run side
    by side, and a job's fixed cost (planning, scheduling, a cold JVM's compiling) is paid once.
    Columns of one name must have one type in all of them."""
    if len(dfs) == 1:
        return [dfs[0].collect()]
    both = dfs[0].withColumn("_df", F.lit(0))
    for i, df in enumerate(dfs[1:], 1):
        both = both.unionByName(df.withColumn("_df", F.lit(i)), allowMissingColumns=True)
    got = both.collect()
    return [[Row(**{c: r[c] for c in df.columns}) for r in got if r["_df"] == i] for i, df in enumerate(dfs)]


def quality(rows, files, unreadable, vanished):
    counts = {r["_problem"]: r["n"] for r in rows}
    q = landing.summarize(counts, files, unreadable, vanished)
    kept = sum(r["kept"] for r in rows if r["_problem"] is None)
    q["clean_records"] = int(kept)
    q["duplicates"] = q["valid_records"] - int(kept)
    return q


ROWS_PER_FILE = 50_000  # clean/device_window are written by fewer tasks when each would write less


def writers(rows, hours, shape):
    """How many tasks write a table partitioned by hour: one file per task and hour, so for a long
    span of little data (30 days of a few devices) fewer tasks, else as many as there are partitions;
    never fewer than the cores while there is work for them."""
    import math

    want = math.ceil(rows / max(1, hours) / ROWS_PER_FILE)
    floor = min(shape["cores"], math.ceil(rows / (4 * ROWS_PER_FILE)))
    return max(1, min(shape["partitions"], max(want, floor)))


def phase(spark, what):
    """Name the Spark jobs that follow (the Spark UI and bench/spark_report.py show it)."""
    spark.sparkContext.setJobDescription("fleetwire report: " + what)


# Columns whose values are nearly all distinct: Parquet's dictionary encoding is tried and dropped
# for each of them in every file, a fifth of the `clean` table's write at 10M records; without it they
# are delta-encoded (PARQUET_WRITER below).
NO_DICTIONARY = (
    "ts",
    "seq",
    "rx_ts",
    "uptime_s",
    "heap_free",
    "heap_min",
    "vbat_mv",
    "store_used",
    "min_seq",
    "max_seq",
    "rssi_avg",
    "heap_delta",
)


# Parquet writer settings, unless the user set them (--conf spark.hadoop.parquet.writer.version=v1 for
# a reader older than Spark 3.3, which cannot read delta-encoded pages). Format 2 data pages store the
# columns without a dictionary (ts, seq, counters that rise) delta-encoded, not plain: at 10M records
# `clean` took 210 MiB instead of 343, and writing it a fifth less time. Parquet 1.15's size
# statistics (level histograms and unencoded sizes, which none of the job's readers use) cost about
# another 5 % of the write. (A write of the 10M `clean` table from a cache, 3 rounds alternately:
# 18.0, 18.0 s as it was; 16.0, 13.7 s with v2; 14.9, 13.8 s with both.)
PARQUET_WRITER = {"parquet.writer.version": "v2", "parquet.size.statistics.enabled": "false"}


def write(df, path, partition_by=(), files=None, dynamic=False, single=False):
    """Write a table as Parquet, replacing it (dynamic: replacing only the partitions df has).
    files: at most that many tasks write (coalesced from a cached input); single: one file, from a
    small result (shuffled to one task, so that what computes it still runs on every core)."""
    if single:
        df = df.repartition(1)
    elif files:
        df = df.coalesce(files)
    w = df.write.mode("overwrite").option("partitionOverwriteMode", "dynamic" if dynamic else "static")
    user = df.sparkSession.sparkContext._jsc.hadoopConfiguration()
    for k, v in PARQUET_WRITER.items():
        if user.get(k) is None:
            w = w.option(k, v)
    for c in NO_DICTIONARY:
        if c in df.columns:
            w = w.option("parquet.enable.dictionary#" + c, "false")
    if partition_by:
        w = w.partitionBy(*partition_by)
    w.parquet(path)


def batch(spark, store, cfg, p):
    files, unreadable, size = scan(store, cfg, p, cfg.since_ms)
    shape = session.tune(spark, size, cfg.fmt, cfg.partitions)
    phase(spark, "read and deduplicate")
    (cand, rows), files, vanished = read_records(
        spark, store, files, cfg, lambda c: deduplicate(c, shape["partitions"])
    )
    q = quality(rows, len(files), unreadable, vanished)
    cached = [cand]
    try:
        if q["valid_records"] == 0:
            raise landing.InputError(
                "no usable records in %s: %s"
                % (cfg.input, "; ".join(line.strip() for line in landing.describe(q)))
            )
        for line in landing.describe(q):
            cfg.log(line)
        valid = [r for r in rows if r["_problem"] is None][0]
        k = writers(valid["kept"], (valid["ts_max"] - valid["ts_min"]) // HOUR_MS + 1, shape)
        clean = metrics.clean_records(cand)
        phase(spark, "clean")
        write(clean.select(*metrics.CLEAN_COLUMNS), p.table("clean"), ("date", "hour"), files=k)
        win = metrics.link(metrics.windows(clean)).select(*metrics.WINDOW_KEPT).persist(CACHE)
        cached.append(win)
        phase(spark, "device_window")
        write(win.select(*metrics.WINDOW_COLUMNS), p.table("device_window"), ("date", "hour"), files=k)
        # not cached: computed from the cached windows and records they keep their partitioning by
        # device_id, so device_health needs no shuffle (a cache not yet filled hides it from the planner)
        hw = metrics.hour_windows(win)
        hr = metrics.hour_records(clean)
        hist = metrics.histogram(clean, by_hour=False).persist(CACHE)
        cached.append(hist)
        first_hour = valid["ts_min"] - valid["ts_min"] % HOUR_MS
        report_path = finish(spark, store, cfg, p, Partials(hw, hr, hist), q, valid["ts_max"], first_hour)
    finally:
        for df in cached:
            df.unpersist()
    return Result(p.out, {n: p.table(n) for n in S.TABLES}, q, 0.0, report_path)


@dataclass
class Partials:
    """What device_health, firmware_cohort, outliers and the report are merged from: hw
    (metrics.hour_windows or merge_windows rows), hr (hour_records or merge_records rows), hist
    (metrics.histogram rows), and unless given, from hr and hw: the hour counts (metrics.hour_counts),
    the report's fleet_hourly and the boots' figures (metrics.boot_moments; then hr may be None)."""

    hw: object
    hr: object
    hist: object
    fw_hours: object = None
    dev_hours: object = None
    fleet: object = None
    boots: object = None


def finish(spark, store, cfg, p, parts, q, newest_ts, first_hour_ms):
    """The tables merged from the partials (device_health, firmware_cohort, outliers), the report
    and quality.json. Returns the report's URI (or None)."""
    # the partials are small (a few rows per device and hour, or day) and each is read by
    # device_health and firmware_cohort (hr twice by device_health): kept, instead of aggregating
    # the records again
    q["simulator"] = sim_lag(store, p.input)
    from fleetwire.host.fleet.lag import describe

    for line in describe(q["simulator"]):
        cfg.log(line)
    hw, hr = parts.hw.persist(CACHE), parts.hr
    fw_hours, dev_hours, boots = parts.fw_hours, parts.dev_hours, parts.boots
    if fw_hours is None or boots is None:
        hr = hr.persist(CACHE)
    if fw_hours is None:
        fw_hours, dev_hours = metrics.hour_counts(hr)
    if boots is None:  # per boot, the partials' co-moments combined about the boot's means
        boots = metrics.boot_moments(metrics.merge_records(hr, ["device_id", "boot_id"]))
    health = metrics.device_health(hw, boots, dev_hours, cfg.silent_after_s, newest_ts, first_hour_ms)
    health = health.persist(CACHE)
    try:
        phase(spark, "device_health")
        write(health, p.table("device_health"), single=True)
        phase(spark, "firmware_cohort")
        write(metrics.firmware_cohort(fw_hours, parts.hist, hw), p.table("firmware_cohort"), single=True)
        phase(spark, "outliers")
        write(metrics.outliers(health, min_cohort=cfg.min_cohort), p.table("outliers"), single=True)
        write_crashes(spark, store, p, cfg.symbols)
        write_commands(spark, store, p)
        report_path = None
        if cfg.report:
            phase(spark, "report")
            from fleetwire.host.analytics import report

            fleet = parts.fleet if parts.fleet is not None else metrics.fleet_hourly(hw)
            report_path = report.write(spark, store, p.out, fleet, parts.hist, q)
    finally:
        for df in (health, hr, hw):
            if df is not None:
                df.unpersist()
    store.write_text(storage.join(p.out, "quality.json"), json.dumps(q, indent=2, sort_keys=True))
    return report_path


def sim_lag(store, root):
    """The lag of the simulators that made the records (LANDING/_sim/*.json, `fleetwire sim
    --landing`) -> one summary, or None when no simulator left one."""
    from fleetwire.host.fleet import lag

    d = storage.join(root, lag.SIM_DIR)
    found = [json.loads(store.read_text(storage.join(d, n))) for n in store.listdir(d) if n.endswith(".json")]
    return lag.merge(found)


def write_crashes(spark, store, p, symbols=None):
    """crashes, crash_signatures, crash_releases from every crash record landed (crashes.py):
    after firmware_cohort, and by an incremental run whatever its new files held."""
    from fleetwire.host.analytics import crashes

    phase(spark, "crashes")
    crashes.write(spark, store, p.input, p.out, lambda df, path: write(df, path, single=True), symbols)


def write_commands(spark, store, p):
    """commands, convergence from every command event landed (commands.py): after device_health,
    and by an incremental run whatever its new files held."""
    from fleetwire.host.analytics import commands

    phase(spark, "commands")
    commands.write(spark, store, p.input, p.out, lambda df, path: write(df, path, single=True))


def report(input, out, master=None, extra=None, **settings):
    """The whole job as a library call: a Spark session (master, as `fleetwire report
    --master`; extra: Spark settings), the run, the session stopped -> Result. settings are
    Config's (fmt, since_ms, incremental, report, log, ...). Raises landing.InputError for
    input it cannot use, checked before a JVM starts when the input is local."""
    cfg = Config(input=input, out=out, **settings)
    if storage.is_local(input):
        landing.scan(input, cfg.fmt)
    spark = session.build(master, extra=extra)
    try:
        return run(spark, cfg)
    finally:
        spark.stop()


def table_rows(result, name):
    """The rows of one of the small tables a run wrote (firmware_cohort, outliers) -> [dict]."""
    import pandas as pd

    return pd.read_parquet(storage.local_path(result.tables[name])).to_dict("records")

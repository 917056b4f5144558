"""The `fleetwire report` job: landing zone -> Parquet tables (+ report.html).

Batch: read every file of the landing zone (or those from --since on) and rebuild the tables.
Incremental: Structured Streaming's file source with a checkpoint and trigger(availableNow=True)
reads only the files it has not seen before; each micro-batch's usable records are staged as
Parquet under OUT/_staging/batch_id=N (overwritten if a batch is replayed after a crash, so a
record is staged exactly once), and the tables are then rebuilt from everything staged.
"""

import json
import os
import shutil
import time
from dataclasses import dataclass, field

from fleetwire.host.analytics import landing
from fleetwire.host.analytics import schema as S

SMALL_TABLES = ("firmware_cohort", "outliers", "device_health")


@dataclass
class Config:
    input: str
    out: str
    fmt: str = "ndjson"
    since_ms: int = None
    incremental: bool = False
    checkpoint: str = None  # default OUT/_checkpoint
    silent_after_s: int = S.SILENT_AFTER_S
    min_cohort: int = S.MIN_COHORT
    partitions: int = None  # default: the session's shuffle partitions
    report: bool = True
    max_files_per_trigger: int = None
    log: object = field(default=print, repr=False)


@dataclass
class Result:
    out: str
    tables: dict  # name -> Parquet directory
    quality: dict
    seconds: float
    report: str = None
    new_records: int = None  # incremental: usable records in files not seen before
    new_files: int = None


def run(spark, cfg):
    """Run the job in this session. Raises landing.InputError for input it cannot use."""
    from fleetwire.host.analytics import session

    session.prepare(spark)
    spark.conf.set("spark.sql.files.ignoreMissingFiles", "true")
    t0 = time.time()
    parts = cfg.partitions or int(spark.conf.get("spark.sql.shuffle.partitions"))
    local = not landing.is_remote(cfg.input)
    unreadable = []
    files = None
    if local:
        found, unreadable = landing.scan(cfg.input, cfg.fmt, None if cfg.incremental else cfg.since_ms)
        files = len(found)
    else:
        found = cfg.input
    for p, why in unreadable:
        cfg.log("warning: skipping unreadable file %s (%s)" % (p, why))
    os.makedirs(cfg.out, exist_ok=True) if local or not landing.is_remote(cfg.out) else None
    new = None
    if cfg.incremental:
        classified, quality_counts, new = _stage_new_files(spark, cfg)
    else:
        classified = landing.classify(landing.read(spark, found, cfg.fmt), cfg.since_ms)
        quality_counts = None
    from fleetwire.host.analytics import metrics

    tables, cached, rows = metrics.build(classified, parts, cfg.silent_after_s, cfg.min_cohort)
    counts = {r["_problem"]: r["n"] for r in rows}
    kept = sum(r["kept"] for r in rows if r["_problem"] is None)
    if quality_counts is not None:  # incremental: problems were counted when staged
        for k, v in quality_counts.items():
            if k is not None:
                counts[k] = counts.get(k, 0) + v
    q = landing.summarize(counts, files, unreadable)
    q["clean_records"] = int(kept)
    q["duplicates"] = q["valid_records"] - int(kept)
    if new is not None:
        q["new_files"], q["new_records"] = new
    if q["valid_records"] == 0:
        _unpersist(cached)
        raise landing.InputError(
            "no usable records in %s: %s" % (cfg.input, "; ".join(l.strip() for l in landing.describe(q)))
        )
    for line in landing.describe(q):
        cfg.log(line)
    paths = {}
    try:
        for name in S.TABLES:
            df = tables[name]
            path = os.path.join(cfg.out, name)
            w = df.coalesce(1) if name in ("firmware_cohort", "outliers") else df
            w = w.write.mode("overwrite").option("partitionOverwriteMode", "static")
            if name == "clean":
                w = w.partitionBy("date")
            w.parquet(path)
            paths[name] = path
        report_path = None
        if cfg.report:
            from fleetwire.host.analytics import report

            report_path = report.write(spark, cfg.out, cached, tables, q)
    finally:
        _unpersist(cached)
    with open(os.path.join(cfg.out, "quality.json"), "w") as f:
        json.dump(q, f, indent=2, sort_keys=True)
    secs = time.time() - t0
    res = Result(cfg.out, paths, q, secs, report_path)
    if new is not None:
        res.new_files, res.new_records = new
    return res


def _unpersist(cached):
    for df in cached.values():
        try:
            df.unpersist()
        except Exception:  # noqa: BLE001 - best effort on the way out
            pass


def _stage_new_files(spark, cfg):
    """Run the availableNow stream over files not yet in the checkpoint. Returns
    (all staged usable records classified, problem counts over all batches, (new files, new records))."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    staging = os.path.join(cfg.out, "_staging")
    stats_dir = os.path.join(staging, "_stats")
    ck = cfg.checkpoint or os.path.join(cfg.out, "_checkpoint")
    os.makedirs(stats_dir, exist_ok=True)
    this_run = {"files": 0, "records": 0}

    def each(batch_df, batch_id):
        df = landing.classify(batch_df.withColumn("_file", F.input_file_name()), cfg.since_ms)
        df = df.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            rows = (
                df.groupBy("_problem")
                .agg(F.count(F.lit(1)).alias("n"), F.countDistinct("_file").alias("files"))
                .collect()
            )
            files = df.select(F.countDistinct("_file")).first()[0]
            counts = {r["_problem"]: r["n"] for r in rows}
            (
                df.filter(F.col("_problem").isNull())
                .drop("_problem", "_file")
                .write.mode("overwrite")
                .parquet(os.path.join(staging, "batch_id=%d" % batch_id))
            )
            with open(os.path.join(stats_dir, "batch-%d.json" % batch_id), "w") as f:
                json.dump({"files": files, "counts": [[k, v] for k, v in counts.items()]}, f)
            this_run["files"] += files
            this_run["records"] += counts.get(None, 0)
        finally:
            df.unpersist()

    q = (
        landing.read_stream(spark, cfg.input, cfg.fmt, cfg.max_files_per_trigger)
        .writeStream.foreachBatch(each)
        .option("checkpointLocation", ck)
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination()
    totals = {}
    for n in sorted(os.listdir(stats_dir)):
        with open(os.path.join(stats_dir, n)) as f:
            for k, v in json.load(f)["counts"]:
                if k is not None:
                    totals[k] = totals.get(k, 0) + v
    if not any(n.startswith("batch_id=") for n in os.listdir(staging)):
        raise landing.InputError("no records staged from %s yet" % cfg.input)
    cfg.log("incremental: %d new files, %d new usable records" % (this_run["files"], this_run["records"]))
    staged = spark.read.schema(S.spark_schema(with_corrupt=False)).parquet(staging)
    return (
        staged.select(*S.FIELD_NAMES).withColumn("_problem", F.lit(None).cast("string")),
        totals,
        (this_run["files"], this_run["records"]),
    )


def reset_incremental(out, checkpoint=None):
    """Forget what the incremental mode has seen (the next run reads everything again)."""
    for p in (checkpoint or os.path.join(out, "_checkpoint"), os.path.join(out, "_staging")):
        shutil.rmtree(p, ignore_errors=True)

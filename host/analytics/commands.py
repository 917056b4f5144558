"""Commands and desired state, from LANDING/_commands/ (date=YYYY-MM-DD/<writer>.ndjson): one line
an event, {"rx_ts": ms, "device_id", "kind", "body"}. The collector (`fleetwire collect
--commands`) lands the boards' "answer" and "reported" documents; the operator's side
(`fleetwire cmd --landing`, `fleetwire state set --landing`: fleetwire.host.command) lands what it
"sent" (body: id, name, deadline) and each board's "desired" version (body: version and the change
it belongs to: one `state set` for many boards is one change). Two small tables:

- commands: per release and command name: sent, answered, ok, error, expired, interrupted,
  unanswered, and the latency from sent to the answer landed (p50, p95, seconds). The release is
  the board's in device_health (its latest). An answer whose command was not landed by the
  operator counts as answered under no name.
- convergence: per change: when it was set, boards, those that reported its version (or a later
  one) after it was set, and how long they took (p50, p95, max, seconds): how long the fleet took
  to converge.

The events are few beside the telemetry: every run, incremental ones too, reads them all and
rewrites both tables whole."""

from pyspark.sql import functions as F
from pyspark.sql import types as T

from fleetwire.host.analytics import storage

DIR = "_commands"  # fleetwire.host.fleet.collector: answers and reported states
TABLES = ["commands", "convergence"]

SCHEMA = T.StructType(
    [
        T.StructField("rx_ts", T.LongType()),
        T.StructField("device_id", T.StringType()),
        T.StructField("kind", T.StringType()),
        T.StructField(
            "body",
            T.StructType(
                [
                    T.StructField("id", T.StringType()),
                    T.StructField("name", T.StringType()),
                    T.StructField("status", T.StringType()),
                    T.StructField("version", T.LongType()),
                    T.StructField("change", T.StringType()),
                ]
            ),
        ),
    ]
)

STATUSES = ("ok", "error", "expired", "interrupted")
SEEN = "_command_files.json"  # OUT/: the event files the tables were made from, with their sizes


def files(store, landing):
    """[[path, size]] of the event files under LANDING/_commands/ (a listing: no Spark job)."""
    root = storage.join(landing, DIR)
    if not store.exists(root):
        return []
    return sorted([p, n] for p, n in store.list_files(root) if p.endswith(".ndjson") and "/date=" in p)


def changed(store, landing, out):
    """Whether the event files differ from those the tables were last made from (an incremental
    run with no new telemetry writes the tables only then)."""
    import json

    seen = storage.join(out, SEEN)
    if not store.exists(seen):
        return True
    return json.loads(store.read_text(seen)) != files(store, landing)


def read(spark, store, landing):
    """The events (extract): SCHEMA's columns; none when nothing was landed."""
    if not files(store, landing):
        return spark.createDataFrame([], SCHEMA)
    where = storage.join(landing, DIR, "date=*", "*.ndjson")
    events = spark.read.schema(SCHEMA).option("mode", "DROPMALFORMED").json(where)
    return events.filter(F.col("device_id").isNotNull() & F.col("rx_ts").isNotNull())


def commands(events, health):
    """The commands table (transform): events -> per (fw_version, name) counts and latency."""
    sent = (
        events.filter(F.col("kind") == "sent")
        .groupBy("device_id", F.col("body.id").alias("id"))
        .agg(F.min("rx_ts").alias("sent_ts"), F.first("body.name").alias("name"))
    )
    answer = (
        events.filter(F.col("kind") == "answer")
        .groupBy("device_id", F.col("body.id").alias("id"))
        .agg(F.min("rx_ts").alias("answer_ts"), F.first("body.status").alias("status"))
    )
    both = sent.join(answer, ["device_id", "id"], "full_outer").join(
        health.select("device_id", "fw_version"), "device_id", "left"
    )
    lat = (F.col("answer_ts") - F.col("sent_ts")) / 1000.0
    aggs = [
        F.count("sent_ts").alias("sent"),
        F.count("answer_ts").alias("answered"),
        *[F.sum((F.col("status") == s).cast("long")).alias(s) for s in STATUSES],
        F.sum((F.col("sent_ts").isNotNull() & F.col("answer_ts").isNull()).cast("long")).alias("unanswered"),
        F.percentile_approx(F.when(F.col("sent_ts").isNotNull(), lat), [0.5, 0.95], 1000).alias("_lat"),
    ]
    return (
        both.groupBy("fw_version", "name")
        .agg(*aggs)
        .select(
            "fw_version",
            "name",
            "sent",
            "answered",
            *[F.coalesce(F.col(s), F.lit(0)).alias(s) for s in STATUSES],
            F.coalesce("unanswered", F.lit(0)).alias("unanswered"),
            F.col("_lat")[0].alias("latency_p50_s"),
            F.col("_lat")[1].alias("latency_p95_s"),
        )
    )


def convergence(events):
    """The convergence table (transform): per change, how long its boards took to report it."""
    desired = events.filter((F.col("kind") == "desired") & F.col("body.change").isNotNull()).select(
        "device_id", F.col("body.change").alias("change"), F.col("body.version").alias("version"), "rx_ts"
    )
    reported = events.filter(F.col("kind") == "reported").select(
        "device_id", F.col("body.version").alias("r_version"), F.col("rx_ts").alias("r_ts")
    )
    after = F.col("r_ts") >= F.col("rx_ts")  # a report of that version or a later one, after it was set
    per_board = (
        desired.join(reported, "device_id", "left")
        .groupBy("change", "device_id", "version", "rx_ts")
        .agg(F.min(F.when(after & (F.col("r_version") >= F.col("version")), F.col("r_ts"))).alias("done_ts"))
    )
    took = (F.col("done_ts") - F.col("rx_ts")) / 1000.0
    return (
        per_board.groupBy("change")
        .agg(
            F.min("rx_ts").alias("set_ts"),
            F.count("*").alias("boards"),
            F.count("done_ts").alias("converged"),
            F.percentile_approx(took, [0.5, 0.95], 1000).alias("_t"),
            F.max(took).alias("converged_max_s"),
        )
        .select(
            "change",
            "set_ts",
            "boards",
            "converged",
            F.col("_t")[0].alias("converged_p50_s"),
            F.col("_t")[1].alias("converged_p95_s"),
            "converged_max_s",
        )
    )


def write(spark, store, landing, out, write_table):
    """Both tables from every event landed (load), beside the others: after device_health."""
    import json

    seen = files(store, landing)
    events = read(spark, store, landing).persist()
    try:
        health = spark.read.parquet(storage.join(out, "device_health"))
        write_table(commands(events, health), storage.join(out, "commands"))
        write_table(convergence(events), storage.join(out, "convergence"))
    finally:
        events.unpersist()
    store.write_text(storage.join(out, SEEN), json.dumps(seen))

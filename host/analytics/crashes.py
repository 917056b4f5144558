"""Why boards crash, from the crash records the collector lands (LANDING/_crashes/, one JSON file
a record: fleetwire.crashsend's fields, the collector's rx_ts). Three small tables:

- crashes: one row a record, with its signature: the exception's type and its innermost frame's
  function and file, `ZeroDivisionError in step (app.py)`, and the frame's location, which
  adds the line when the build kept line numbers (`step (app.py:42)`; a `.mpy` built with -O3
  says line 1 of every frame). With the release's symbol map (host/rig/symbols.py: `fleetwire
  bundle` writes it beside the bundle; a directory of them, `symbols=`), the frame is named by
  the map: `ZeroDivisionError in App.step (app.py)`, located `App.step (app.py:40-45)`. Lines
  stay out of the signature, so a crash keeps its signature from one release to the next.
  Resets without an exception (kind power_on, watchdog, brownout, panic) are rows too, with no
  signature: they are no crash of the program, and vitals count them already.
- crash_signatures: per release and signature: crashes, devices, first and last seen, and a
  sample (the first record's traceback and log tail).
- crash_releases: per release: the devices the telemetry saw on it (firmware_cohort), those
  with a crash on it, crash-free devices in percent, crashes.

The files are few (one a crash, not a record a minute): every run, incremental ones too, reads
them all and rewrites the tables whole, so they are always those of every record landed."""

import os

from pyspark.sql import functions as F
from pyspark.sql import types as T

from fleetwire.host.analytics import storage

DIR = "_crashes"  # fleetwire.host.fleet.collector.CRASHES
TABLES = ["crashes", "crash_signatures", "crash_releases"]

SCHEMA = T.StructType(
    [
        T.StructField("device_id", T.StringType()),
        T.StructField("boot_id", T.LongType()),
        T.StructField("crash_id", T.LongType()),
        T.StructField("kind", T.StringType()),
        T.StructField("fw_version", T.StringType()),
        T.StructField("type", T.StringType()),
        T.StructField("message", T.StringType()),
        T.StructField("traceback", T.StringType()),
        T.StructField("log", T.ArrayType(T.StringType())),
        T.StructField("uptime_s", T.LongType()),
        T.StructField("heap_free", T.LongType()),
        T.StructField("rx_ts", T.LongType()),
    ]
)

# the innermost frame: the last `File "...", line N, in f` of the traceback
_FRAME = r'(?s).*File "([^"]*)", line (\d+), in (\S+)'


SEEN = "_crash_files.json"  # OUT/: the crash files the tables were made from


def files(store, landing):
    """The crash records' file names under LANDING/_crashes/ (a listing: no Spark job)."""
    return [f for f in store.listdir(storage.join(landing, DIR)) if str(f).endswith(".json")]


def changed(store, landing, out):
    """Whether the crash files differ from those the tables were last made from (an
    incremental run with no new telemetry writes the crash tables only then)."""
    import json

    seen = storage.join(out, SEEN)
    if not store.exists(seen):
        return True
    return json.loads(store.read_text(seen)) != files(store, landing)


def read(spark, store, landing, names=None):
    """The crash records under LANDING/_crashes/ (an empty frame when there are none)."""
    names = files(store, landing) if names is None else names
    if not names:
        return spark.createDataFrame([], SCHEMA)
    d = storage.join(landing, DIR)
    return spark.read.schema(SCHEMA).option("mode", "DROPMALFORMED").json(storage.join(d, "*.json"))


def symbol_maps(spark, d):
    """The symbol maps in directory d (*symbols.json of a release: `fleetwire bundle` writes
    <bundle>.symbols.json) -> a frame per (fw_version, file, function): _sym_name (qualified
    names, " or " between those of one name), _sym_where (with paths and lines). None: no d."""
    if not d:
        return None
    from fleetwire.host.rig import symbols

    rows = []
    for f in sorted(os.listdir(d)):
        if not f.endswith("symbols.json"):
            continue
        m = symbols.load(os.path.join(d, f))
        if not m.get("release"):  # a build's map names no release: it cannot be told which
            continue
        for name, mods in m["files"].items():
            for mod in mods:
                for q, fn, first, last in mod["functions"]:
                    rows.append((m["release"], name, fn, q, mod["path"], first, last))
    schema = "fw_version string, _base string, _fn string, q string, path string, first long, last long"
    df = spark.createDataFrame(rows, schema)
    base = F.regexp_extract("path", r"([^/\\]*)$", 1)
    return df.groupBy("fw_version", "_base", "_fn").agg(
        F.concat_ws(" or ", F.sort_array(F.collect_set(F.concat("q", F.lit(" ("), base, F.lit(")"))))).alias(
            "_sym_name"
        ),
        F.concat_ws(
            " or ",
            F.sort_array(
                F.collect_set(
                    F.concat("q", F.lit(" ("), base, F.lit(":"), "first", F.lit("-"), "last", F.lit(")"))
                )
            ),
        ).alias("_sym_where"),
    )


def crashes(raw, maps=None):
    """One row a record, with location and signature (null for a reset without an exception);
    maps: symbol_maps()."""
    tb = F.coalesce(F.col("traceback"), F.lit(""))
    rows = raw.select(
        "*",
        F.regexp_extract(F.regexp_extract(tb, _FRAME, 1), r"([^/\\]*)$", 1).alias("_base"),
        F.regexp_extract(tb, _FRAME, 2).alias("_line"),
        F.regexp_extract(tb, _FRAME, 3).alias("_fn"),
    )
    if maps is not None:
        rows = rows.join(maps, ["fw_version", "_base", "_fn"], "left")
    else:
        rows = rows.select(
            "*", F.lit(None).cast("string").alias("_sym_name"), F.lit(None).cast("string").alias("_sym_where")
        )
    fn, base, line = F.col("_fn"), F.col("_base"), F.col("_line")
    name = F.coalesce("_sym_name", F.concat(fn, F.lit(" ("), base, F.lit(")")))
    where = F.coalesce(
        "_sym_where",
        F.concat(
            fn,
            F.lit(" ("),
            base,
            F.when(line == "1", F.lit("")).otherwise(F.concat(F.lit(":"), line)),
            F.lit(")"),
        ),
    )
    exc = F.col("kind") == "exception"
    known = fn != ""
    return rows.select(
        "device_id",
        "boot_id",
        "crash_id",
        "kind",
        "fw_version",
        "type",
        "message",
        F.when(exc & known, where).alias("location"),
        F.when(exc, F.concat_ws(" in ", F.col("type"), F.when(known, name).otherwise(F.lit("?")))).alias(
            "signature"
        ),
        "traceback",
        F.concat_ws("\n", F.coalesce(F.col("log"), F.array())).alias("log_tail"),
        "uptime_s",
        "heap_free",
        "rx_ts",
    )


def signatures(rows):
    """Per release and signature: crashes, devices, first/last seen, a sample."""
    first = F.struct("rx_ts", "device_id", "boot_id", "crash_id", "traceback", "log_tail")
    return (
        rows.filter(F.col("signature").isNotNull())
        .groupBy("fw_version", "signature", "type", "location")
        .agg(
            F.count("*").alias("crashes"),
            F.countDistinct("device_id").alias("devices"),
            F.min("rx_ts").alias("first_seen"),
            F.max("rx_ts").alias("last_seen"),
            F.min(first).alias("_s"),
        )
        .select(
            "fw_version",
            "signature",
            "type",
            "location",
            "crashes",
            "devices",
            "first_seen",
            "last_seen",
            F.col("_s.traceback").alias("sample_traceback"),
            F.col("_s.log_tail").alias("sample_log"),
        )
    )


def releases(rows, cohort):
    """Per release the telemetry saw (firmware_cohort: fw_version, devices): devices that
    crashed on it, crash-free devices in percent, crashes."""
    hit = (
        rows.filter(F.col("signature").isNotNull())
        .groupBy("fw_version")
        .agg(F.countDistinct("device_id").alias("crashed_devices"), F.count("*").alias("crashes"))
    )
    seen = cohort.select("fw_version", "devices")
    both = seen.join(hit, "fw_version", "full_outer").fillna(0, ["crashed_devices", "crashes"])
    devices = F.greatest(F.coalesce(F.col("devices"), F.lit(0)), F.col("crashed_devices"))
    return both.select(
        "fw_version",
        devices.alias("devices"),
        "crashed_devices",
        F.when(devices > 0, 100.0 * (devices - F.col("crashed_devices")) / devices).alias(
            "crash_free_devices_pct"
        ),
        "crashes",
    )


def write(spark, store, landing, out, write_table, symbols=None):
    """The three tables from every crash record landed, beside the others (write_table(df, path):
    the job's write, one file each); symbols: a directory of release symbol maps."""
    import json

    names = files(store, landing)
    rows = crashes(read(spark, store, landing, names), symbol_maps(spark, symbols)).persist()
    try:
        write_table(rows, storage.join(out, "crashes"))
        write_table(signatures(rows), storage.join(out, "crash_signatures"))
        cohort = spark.read.parquet(storage.join(out, "firmware_cohort"))
        write_table(releases(rows, cohort), storage.join(out, "crash_releases"))
    finally:
        rows.unpersist()
    store.write_text(storage.join(out, SEEN), json.dumps(names))


def named(row):
    """A crash_signatures row as a person reads it: `ZeroDivisionError in average (app.py:13-17)`
    (its type and location, with the lines where known), else its signature."""
    return "%s in %s" % (row["type"], row["location"]) if row.get("location") else row["signature"]


def top(sig_rows, version, baseline=None):
    """The top signature of `version` (crash_signatures rows, as dicts), preferring one the
    baseline release does not have (a new crash) -> (row, new) or (None, False)."""
    old = {r["signature"] for r in sig_rows if r["fw_version"] == baseline}
    mine = sorted(
        (r for r in sig_rows if r["fw_version"] == version),
        key=lambda r: (-int(r["devices"]), -int(r["crashes"]), r["signature"]),
    )
    new = [r for r in mine if r["signature"] not in old]
    if new:
        return new[0], True
    return (mine[0], False) if mine else (None, False)

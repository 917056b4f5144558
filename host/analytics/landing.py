"""The landing zone: finding its files, reading them with the record schema, and sorting out
records that cannot be used, with a reason for each (counted, never silently dropped)."""

import os
import re

from fleetwire.host.analytics import schema as S

LAYOUT = "LANDING/date=YYYY-MM-DD/hour=HH/*.ndjson"
EXTENSIONS = {"ndjson": (".ndjson", ".json"), "parquet": (".parquet",)}

# _problem values, in the order they are checked, and how the summary words them.
PROBLEMS = {
    "malformed": "not a JSON object (malformed line)",
    "mistyped": "a field of the wrong type",
    "bad_period": "period_s not positive",
}
for _f in S.REQUIRED:
    PROBLEMS["missing_" + _f] = "missing " + _f
FILTERED = "before_since"


class InputError(Exception):
    """Bad input the job cannot work around; the message says what and where."""


def is_remote(path):
    return bool(re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*://", path)) and not path.startswith("file://")


def scan(root, fmt="ndjson", since_ms=None):
    """(readable files, unreadable [(path, reason)]) under a local landing zone, skipping
    date= partitions wholly before since_ms. Raises InputError for a missing or empty zone."""
    if fmt not in EXTENSIONS:
        raise InputError("unknown input format %r (ndjson or parquet)" % fmt)
    if root.startswith("file://"):
        root = root[len("file://") :]
    if not os.path.exists(root):
        raise InputError("landing zone %s does not exist (expected %s)" % (root, LAYOUT))
    if not os.path.isdir(root):
        raise InputError("landing zone %s is not a directory (expected %s)" % (root, LAYOUT))
    since_day = None
    if since_ms is not None:
        import datetime as dt

        since_day = dt.datetime.fromtimestamp(since_ms / 1000, dt.timezone.utc).strftime("%Y-%m-%d")
    good, bad = [], []
    for dirpath, dirnames, names in os.walk(root, followlinks=True):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(("_", ".")))
        m = re.search(r"date=(\d{4}-\d{2}-\d{2})", dirpath)
        if since_day and m and m.group(1) < since_day:
            continue
        for n in sorted(names):
            if n.startswith(("_", ".")) or not n.endswith(EXTENSIONS[fmt]):
                continue
            p = os.path.join(dirpath, n)
            try:
                with open(p, "rb") as f:
                    f.read(1)
                good.append(p)
            except OSError as e:
                bad.append((p, e.strerror or str(e)))
    if not good and not bad:
        raise InputError("no %s files under %s (expected %s)" % ("/".join(EXTENSIONS[fmt]), root, LAYOUT))
    if not good:
        raise InputError(
            "none of the %d files under %s can be read: %s"
            % (len(bad), root, "; ".join("%s: %s" % b for b in bad[:5]))
        )
    return good, bad


def read(spark, paths, fmt="ndjson"):
    """The records of these files (a list of paths, or a directory/glob) as a DataFrame with the
    record schema and the corrupt-record column."""
    from pyspark.sql import functions as F

    if fmt == "parquet":
        df = spark.read.schema(S.spark_schema(with_corrupt=False)).parquet(*_as_list(paths))
        return df.withColumn(S.CORRUPT, F.lit(None).cast("string"))
    return (
        spark.read.schema(S.spark_schema())
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", S.CORRUPT)
        .json(_as_list(paths))
    )


def read_stream(spark, root, fmt="ndjson", max_files=None):
    """The landing zone as a streaming file source (new files only, tracked by the checkpoint)."""
    r = spark.readStream.schema(S.spark_schema(with_corrupt=fmt != "parquet"))
    if max_files:
        r = r.option("maxFilesPerTrigger", int(max_files))
    glob = os.path.join(root, "date=*", "hour=*", "*" + EXTENSIONS[fmt][0])
    if fmt == "parquet":
        from pyspark.sql import functions as F

        return r.parquet(glob).withColumn(S.CORRUPT, F.lit(None).cast("string"))
    return r.option("mode", "PERMISSIVE").option("columnNameOfCorruptRecord", S.CORRUPT).json(glob)


def _as_list(paths):
    return [paths] if isinstance(paths, str) else list(paths)


def classify(raw, since_ms=None):
    """Add `_problem`: null for a usable record, else the first reason it is not."""
    from pyspark.sql import functions as F

    corrupt = F.col(S.CORRUPT).isNotNull()
    all_null = None
    for f in S.FIELD_NAMES:
        c = F.col(f).isNull()
        all_null = c if all_null is None else all_null & c
    p = F.when(corrupt & all_null, "malformed").when(corrupt, "mistyped")
    for f in S.REQUIRED:
        p = p.when(F.col(f).isNull(), "missing_" + f)
    p = p.when(F.col("period_s") <= 0, "bad_period")
    if since_ms is not None:
        p = p.when(F.col("ts") < since_ms, FILTERED)
    return raw.withColumn("_problem", p).drop(S.CORRUPT)


def summarize(counts, files=None, unreadable=()):
    """The quality summary as a dict from {problem or None: delivered records}."""
    valid = int(counts.get(None, 0))
    skipped = {k: int(v) for k, v in counts.items() if k not in (None, FILTERED) and v}
    return {
        "files": files,
        "unreadable_files": [{"path": p, "reason": r} for p, r in unreadable],
        "records_read": int(sum(counts.values())),
        "valid_records": valid,
        "skipped_records": int(sum(skipped.values())),
        "skipped": skipped,
        "filtered_before_since": int(counts.get(FILTERED, 0)),
    }


def describe(q):
    """Human lines for a quality summary."""
    lines = []
    head = "read %d records" % q["records_read"]
    if q.get("files") is not None:
        head += " from %d files" % q["files"]
    lines.append(head + ": %d valid, %d skipped" % (q["valid_records"], q["skipped_records"]))
    for k, v in sorted(q["skipped"].items(), key=lambda kv: -kv[1]):
        lines.append("  skipped %d records: %s" % (v, PROBLEMS.get(k, k)))
    if q.get("filtered_before_since"):
        lines.append("  left out %d records before --since" % q["filtered_before_since"])
    for u in q["unreadable_files"]:
        lines.append("  skipped unreadable file %s (%s)" % (u["path"], u["reason"]))
    if q.get("duplicates") is not None:
        lines.append(
            "  %d duplicate deliveries removed, %d distinct records kept"
            % (q["duplicates"], q["clean_records"])
        )
    return lines

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


def _since_day(since_ms):
    if since_ms is None:
        return None
    import datetime as dt

    return dt.datetime.fromtimestamp(since_ms / 1000, dt.timezone.utc).strftime("%Y-%m-%d")


def _wanted(rel, fmt, since_day):
    """Is this file (path relative to the landing zone) one of its records files?"""
    parts = rel.split("/")
    if any(x.startswith(("_", ".")) for x in parts) or not parts[-1].endswith(EXTENSIONS[fmt]):
        return False
    m = re.search(r"(?:^|/)date=(\d{4}-\d{2}-\d{2})(?:/|$)", rel)
    return not (since_day and m and m.group(1) < since_day)


def scan(root, fmt="ndjson", since_ms=None, storage=None):
    """(readable files, unreadable [(path, reason)], their total size in bytes) under a landing zone,
    skipping date= partitions wholly before since_ms. A local zone (a path or file: URI) is walked
    here, where a file that cannot be opened (a dangling link, no permission) shows; any other
    filesystem is listed through `storage` (Hadoop's API). Raises InputError for a missing or empty zone."""
    if fmt not in EXTENSIONS:
        raise InputError("unknown input format %r (ndjson or parquet)" % fmt)
    from fleetwire.host.analytics.storage import is_local, local_path

    since_day = _since_day(since_ms)
    if is_local(root):
        good, bad, size = _scan_local(local_path(root), fmt, since_day)
    else:
        (good, size), bad = _scan_remote(root, fmt, since_day, storage), []
    if not good and not bad:
        raise InputError("no %s files under %s (expected %s)" % ("/".join(EXTENSIONS[fmt]), root, LAYOUT))
    if not good:
        raise InputError(
            "none of the %d files under %s can be read: %s"
            % (len(bad), root, "; ".join("%s: %s" % b for b in bad[:5]))
        )
    return good, bad, size


def _scan_local(root, fmt, since_day):
    if not os.path.exists(root):
        raise InputError("landing zone %s does not exist (expected %s)" % (root, LAYOUT))
    if not os.path.isdir(root):
        raise InputError("landing zone %s is not a directory (expected %s)" % (root, LAYOUT))
    root = os.path.abspath(root)
    good, bad, size = [], [], 0
    for dirpath, dirnames, names in os.walk(root, followlinks=True):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(("_", ".")))
        for n in sorted(names):
            p = os.path.join(dirpath, n)
            if not _wanted(os.path.relpath(p, root).replace(os.sep, "/"), fmt, since_day):
                continue
            try:
                with open(p, "rb") as f:
                    f.read(1)
                    size += os.fstat(f.fileno()).st_size
                good.append("file://" + p)
            except OSError as e:
                bad.append((p, e.strerror or str(e)))
    return good, bad, size


def _scan_remote(root, fmt, since_day, storage):
    if not storage.exists(root):
        raise InputError("landing zone %s does not exist (expected %s)" % (root, LAYOUT))
    if not storage.is_dir(root):
        raise InputError("landing zone %s is not a directory (expected %s)" % (root, LAYOUT))
    base = root.rstrip("/") + "/"
    found, size = [], 0
    for uri, n in storage.list_files(root):
        rel = uri[len(base) :] if uri.startswith(base) else uri.rsplit("/", 1)[-1]
        if _wanted(rel, fmt, since_day):
            found.append(uri)
            size += n
    return sorted(found), size


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


def is_missing_file(exc):
    """Did this Spark failure come from a file that was not there when Spark looked for it (when the
    DataFrame was made, PATH_NOT_FOUND, or when a task opened it, FileNotFoundException)?"""
    cond = getattr(exc, "getCondition", None) or getattr(exc, "getErrorClass", None)
    if cond is not None and cond() == "PATH_NOT_FOUND":
        return True
    je = getattr(exc, "java_exception", None)
    seen = 0
    while je is not None and seen < 20:
        name = je.getClass().getName()
        if name in ("java.io.FileNotFoundException", "org.apache.spark.SparkFileNotFoundException"):
            return True
        je, seen = je.getCause(), seen + 1
    return False


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


def summarize(counts, files=None, unreadable=(), vanished=()):
    """The quality summary as a dict from {problem or None: delivered records}. `files`: those
    read; `vanished`: listed, but gone when Spark came to read them (their records are not counted)."""
    valid = int(counts.get(None, 0))
    skipped = {k: int(v) for k, v in counts.items() if k not in (None, FILTERED) and v}
    return {
        "files": files,
        "unreadable_files": [{"path": p, "reason": r} for p, r in unreadable],
        "vanished_files": list(vanished),
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
    for v in q.get("vanished_files", ()):
        lines.append("  skipped file %s: it vanished between listing and reading" % v)
    if q.get("duplicates") is not None:
        lines.append(
            "  %d duplicate deliveries removed, %d distinct records kept"
            % (q["duplicates"], q["clean_records"])
        )
    from fleetwire.host.fleet import lag

    lines += lag.describe(q.get("simulator"))  # the records came from `fleetwire sim --landing`
    return lines

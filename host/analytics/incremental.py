"""The incremental run: read only the files not seen before, and recompute only the hours they touch.

A run (number N) goes through three steps, each safe to repeat if the process dies:
  1. note the new files (CHECKPOINT/pending-N.json) and stage their usable records as Parquet,
     partitioned by the date and hour of ts (OUT/_staging/run=N/date=D/hour=H; a repeated run
     deletes and rewrites its own staging);
  2. recompute what those hours change, from the staged records (so a repeat computes the same):
       clean          the touched hours' partitions, from every run's staged records of those hours
       device_window  the touched hours' partitions, plus any hour whose windows chain to them
                      (a device's windows link by min_seq: an untouched hour right after a touched
                      one, or one whose seq range overlaps it, is recomputed too)
       hourly partials  (metrics.hour_windows, hour_records, histogram) for those hours, kept in
                      OUT/_state/<name>/run=N/date=D; device_health, firmware_cohort, outliers, the
                      report and quality.json are merged from them (small: a row per device-hour)
  3. commit: CHECKPOINT/state-N.json (files seen, counts, which run holds each date's partials).
A run that finds no new file changes nothing but quality.json's new_files/new_records, and starts
no Spark job.
"""
import json

from pyspark.sql import functions as F

from pyspark.sql import Window

from fleetwire.host.analytics import job, landing, metrics, session, storage
from fleetwire.host.analytics import schema as S

STATE = ("hour_windows", "hour_records", "histogram")
VERSION = 1


class Checkpoint:
    """The incremental run's own files: committed snapshots and the run in progress."""

    def __init__(self, store, root):
        self.store, self.root = store, root

    def _runs(self, prefix):
        out = []
        for name in self.store.listdir(self.root):
            if name.startswith(prefix) and name.endswith(".json"):
                try:
                    out.append(int(name[len(prefix):-len(".json")]))
                except ValueError:
                    pass
        return sorted(out)

    def load(self):
        runs = self._runs("state-")
        if not runs:
            return empty_snapshot()
        return json.loads(self.store.read_text(storage.join(self.root, "state-%d.json" % runs[-1])))

    def pending(self, n):
        for m in self._runs("pending-"):
            if m < n:                                   # committed after all: the note is stale
                self.store.delete(storage.join(self.root, "pending-%d.json" % m))
        path = storage.join(self.root, "pending-%d.json" % n)
        return json.loads(self.store.read_text(path)) if self.store.exists(path) else None

    def write_pending(self, n, note):
        self.store.write_text(storage.join(self.root, "pending-%d.json" % n), json.dumps(note))

    def commit(self, snap):
        n = snap["run"]
        self.store.write_text(storage.join(self.root, "state-%d.json" % n), json.dumps(snap))
        self.store.delete(storage.join(self.root, "pending-%d.json" % n))
        for m in self._runs("state-"):
            if m < n:
                self.store.delete(storage.join(self.root, "state-%d.json" % m))


def empty_snapshot():
    return {"version": VERSION, "run": 0, "seen": {}, "counts": {}, "files": 0, "hours": {}, "kept": {},
            "state": {t: {} for t in STATE}, "ts_min": None, "ts_max": None, "format": None, "since_ms": None,
            "quality": None}


def _rel(root, uri):
    base = root.rstrip("/") + "/"
    return uri[len(base):] if uri.startswith(base) else uri


def _day(hour_ms):
    import datetime as dt
    return dt.datetime.fromtimestamp(int(hour_ms) // 1000, dt.timezone.utc).strftime("%Y-%m-%d")


def _hour_dir(hour_ms):
    import datetime as dt
    return dt.datetime.fromtimestamp(int(hour_ms) // 1000, dt.timezone.utc).strftime("date=%Y-%m-%d/hour=%-H")


def run(spark, store, cfg, p):
    ck = Checkpoint(store, p.checkpoint)
    snap = ck.load()
    for key, value in (("format", cfg.fmt), ("since_ms", cfg.since_ms)):
        if snap[key] is not None and snap[key] != value and snap["run"]:
            raise landing.InputError(
                "the checkpoint %s was made with %s %s, not %s: use another --out/--checkpoint for a different "
                "input" % (p.checkpoint, "--format" if key == "format" else "--since", snap[key], value))
    n = snap["run"] + 1
    staging = storage.join(p.out, "_staging")
    note = ck.pending(n)
    unreadable = []
    if note is None:
        files, unreadable, _ = job.scan(store, cfg, p, cfg.since_ms)
        new = [f for f in files if _rel(p.input, f) not in snap["seen"]]
        if not new:
            return nothing_new(store, cfg, p, snap, unreadable)
        note = {"files": [_rel(p.input, f) for f in new]}
        ck.write_pending(n, note)
    else:
        cfg.log("incremental: finishing run %d, which stopped before it committed" % n)
    if "hours" not in note:
        note.update(stage(spark, store, cfg, p, n, note["files"], staging))
        ck.write_pending(n, note)
    cfg.log("incremental: %d new files, %d new usable records" % (len(note["read"]), note["counts"].get("", 0)))

    hours = snap["hours"]
    for h in note["hours"]:
        hours.setdefault(str(h), [])
        if n not in hours[str(h)]:
            hours[str(h)].append(n)
    counts = dict(snap["counts"])
    for k, v in note["counts"].items():
        counts[k] = counts.get(k, 0) + v
    snap.update(run=n, counts=counts, files=snap["files"] + len(note["read"]), format=cfg.fmt,
                since_ms=cfg.since_ms)
    for f in note["read"]:
        snap["seen"][f] = 1
    if note["ts_min"] is not None:
        snap["ts_min"] = note["ts_min"] if snap["ts_min"] is None else min(snap["ts_min"], note["ts_min"])
        snap["ts_max"] = note["ts_max"] if snap["ts_max"] is None else max(snap["ts_max"], note["ts_max"])

    q = landing.summarize({(None if k == "" else k): v for k, v in counts.items()}, snap["files"], unreadable,
                          note["vanished"])
    if q["valid_records"] == 0:
        raise landing.InputError("no usable records in %s: %s" % (cfg.input, "; ".join(
            line.strip() for line in landing.describe(q))))
    rewritten, report_path = set(), None
    if note["hours"]:
        rewritten, report_path = derive(spark, store, cfg, p, snap, n, note["hours"], staging, q)
    else:                                               # nothing usable in the new files: tables as they were
        q["clean_records"] = int(sum(snap["kept"].values()))
        q["duplicates"] = q["valid_records"] - q["clean_records"]
    q["new_files"], q["new_records"] = len(note["read"]), note["counts"].get("", 0)
    store.write_text(storage.join(p.out, "quality.json"), json.dumps(q, indent=2, sort_keys=True))
    snap["quality"] = q
    ck.commit(snap)
    cleanup(store, p, snap)
    for line in landing.describe(q):
        cfg.log(line)
    return job.Result(p.out, {t: p.table(t) for t in S.TABLES}, q, 0.0, report_path,
                      new_records=q["new_records"], new_files=q["new_files"], hours=sorted(rewritten))


def nothing_new(store, cfg, p, snap, unreadable):
    cfg.log("incremental: 0 new files, 0 new usable records")
    path = storage.join(p.out, "quality.json")
    q = dict(snap["quality"])
    q["new_files"], q["new_records"] = 0, 0
    q["unreadable_files"] = [{"path": f, "reason": r} for f, r in unreadable]
    q["vanished_files"] = []
    store.write_text(path, json.dumps(q, indent=2, sort_keys=True))
    return job.Result(p.out, {t: p.table(t) for t in S.TABLES}, q, 0.0, None, new_records=0, new_files=0,
                      hours=[])


def stage(spark, store, cfg, p, n, rel_files, staging):
    """Read the new files once: count their records by problem and stage the usable ones."""
    target = storage.join(staging, "run=%d" % n)
    store.delete(target)
    job.phase(spark, "stage new files")
    files = [storage.join(p.input, f) if storage.scheme(f) is None and not f.startswith("/") else f
             for f in rel_files]
    shape = session.tune(spark, 0, cfg.fmt, cfg.partitions)

    def action(classified):
        c = metrics.with_time_columns(classified).persist(job.CACHE)
        try:
            rows = (c.groupBy("_problem", "hour_ms")
                    .agg(F.count(F.lit(1)).alias("n"), F.min("ts").alias("lo"), F.max("ts").alias("hi")).collect())
            valid = c.filter(F.col("_problem").isNull()).select(*S.FIELD_NAMES, "date", "hour")
            job.write(valid.repartition(max(1, shape["cores"]), "date", "hour"), target, ("date", "hour"))
        finally:
            c.unpersist()
        return rows

    rows, read, vanished = job.read_records(spark, store, files, cfg, action)
    counts, hours = {}, set()
    lo = hi = None
    for r in rows:
        k = r["_problem"] or ""
        counts[k] = counts.get(k, 0) + r["n"]
        if r["_problem"] is None:
            hours.add(int(r["hour_ms"]))
            lo = r["lo"] if lo is None else min(lo, r["lo"])
            hi = r["hi"] if hi is None else max(hi, r["hi"])
    return {"read": [_rel(p.input, f) for f in read], "vanished": vanished, "counts": counts,
            "hours": sorted(hours), "ts_min": lo, "ts_max": hi}


def _read_state(spark, p, snap, name):
    paths = [storage.join(p.out, "_state", name, "run=%d" % r, "date=" + d) for d, r in sorted(snap["state"][name].items())]
    return spark.read.parquet(*paths) if paths else None


def derive(spark, store, cfg, p, snap, n, touched, staging, q):
    """Recompute the touched hours' partitions and the merged tables. Returns (hours of device_window
    rewritten, report URI)."""
    cached = []
    try:
        # clean: the touched hours, from every run's staged records of them
        job.phase(spark, "clean (touched hours)")
        paths = [storage.join(staging, "run=%d" % r, _hour_dir(h)) for h in touched for r in snap["hours"][str(h)]]
        staged = spark.read.schema(S.spark_schema(with_corrupt=False)).parquet(*paths)
        shape = session.tune(spark, 0, cfg.fmt, cfg.partitions)
        cand, rows = job.deduplicate(staged.withColumn("_problem", F.lit(None).cast("string")),
                                     shape["partitions"])
        cached.append(cand)
        clean_t = metrics.clean_records(cand)
        job.write(clean_t.select(*metrics.CLEAN_COLUMNS), p.table("clean"), ("date", "hour"), dynamic=True)
        kept = clean_t.groupBy("hour_ms").agg(F.count(F.lit(1)).alias("k")).collect()
        for h in touched:
            snap["kept"][str(h)] = 0
        for r in kept:
            snap["kept"][str(r["hour_ms"])] = r["k"]
        q["clean_records"] = int(sum(snap["kept"].values()))
        q["duplicates"] = q["valid_records"] - q["clean_records"]

        # device_window: the touched hours and those whose windows chain to them
        job.phase(spark, "device_window (touched hours)")
        old_hw = _read_state(spark, p, snap, "hour_windows")
        hours = set(touched)
        links = None
        if old_hw is not None:
            links = (old_hw.groupBy("device_id", "hour_ms").agg(
                F.min("min_seq").alias("first"), F.max("max_seq").alias("last"),
                F.max("last_min_seq").alias("min_seq"), F.max_by("last_rec", "last_min_seq").alias("_rec_last"))
                .persist(job.CACHE))
            cached.append(links)
            hours |= chained(links, clean_t, hours)
        extra = sorted(hours - set(touched))
        clean_w = clean_t
        if extra:
            old = spark.read.parquet(*[storage.join(p.table("clean"), _hour_dir(h)) for h in extra])
            old = metrics.clean_records(old.withColumn("_problem", F.lit(None).cast("string")))
            clean_w = clean_t.unionByName(old.select(*clean_t.columns))
        before = None if links is None else links.filter(~F.col("hour_ms").isin(*sorted(hours)))
        win = metrics.link(metrics.windows(clean_w), before).persist(job.CACHE)
        cached.append(win)
        job.write(win.select(*metrics.WINDOW_COLUMNS), p.table("device_window"), ("date", "hour"), dynamic=True)

        # the hourly partials: the rewritten hours' rows replace theirs; the rest is read as kept
        job.phase(spark, "hourly partials")
        new = {"hour_windows": (metrics.hour_windows(win), hours),
               "hour_records": (metrics.hour_records(clean_t), set(touched)),
               "histogram": (metrics.histogram(clean_t, by_hour=True), set(touched))}
        merged = {}
        for name, (rows_new, hrs) in new.items():
            old = _read_state(spark, p, snap, name)
            m = rows_new if old is None else old.filter(~F.col("hour_ms").isin(*sorted(hrs))).unionByName(rows_new)
            m = m.persist(job.CACHE)
            cached.append(m)
            days = sorted({_day(h) for h in hrs})
            out = storage.join(p.out, "_state", name, "run=%d" % n)
            part = m.withColumn("date", F.date_format(F.timestamp_millis("hour_ms"), "yyyy-MM-dd"))
            job.write(part.filter(F.col("date").isin(*days)).repartition(1, "date"), out, ("date",))
            for d in days:
                snap["state"][name][d] = n
            merged[name] = m
        first_hour = snap["ts_min"] - snap["ts_min"] % metrics.HOUR_MS
        report_path = job.finish(spark, store, cfg, p, merged["hour_windows"], merged["hour_records"],
                                 merged["histogram"], q, snap["ts_max"], first_hour)
        return hours, report_path
    finally:
        for df in cached:
            df.unpersist()


def chained(links, clean_t, touched):
    """Hours outside `touched` whose device_window rows must be recomputed with them: those whose
    seq range overlaps a touched hour's on the same device (a clock that went back), repeated until
    none does, and then each device's first hour after a run of recomputed hours (its first window
    chains to a recomputed one)."""
    ranges = (clean_t.groupBy("device_id", "hour_ms").agg(F.min("seq").alias("first"), F.max("seq").alias("last"))
              .persist(job.CACHE))
    try:
        hours = set(touched)
        ours = ranges
        while True:
            rest = links.filter(~F.col("hour_ms").isin(*sorted(hours)))
            a, b = ours.alias("a"), rest.alias("b")
            hit = (a.join(b, (F.col("a.device_id") == F.col("b.device_id")) & (F.col("a.first") <= F.col("b.last"))
                          & (F.col("b.first") <= F.col("a.last")))
                   .select(F.col("b.hour_ms")).distinct().collect())
            more = {r["hour_ms"] for r in hit} - hours
            if not more:
                break
            hours |= more
            ours = ours.unionByName(links.filter(F.col("hour_ms").isin(*sorted(more))).select(*ranges.columns))
        everyone = (links.filter(~F.col("hour_ms").isin(*sorted(hours))).select("device_id", "hour_ms", "first")
                    .withColumn("_ours", F.lit(False))
                    .unionByName(ours.select("device_id", "hour_ms", "first").withColumn("_ours", F.lit(True))))
        w = Window.partitionBy("device_id").orderBy("first")
        after = (everyone.withColumn("_prev", F.lag("_ours").over(w))
                 .filter(~F.col("_ours") & F.col("_prev")).select("hour_ms").distinct().collect())
        return (hours | {r["hour_ms"] for r in after}) - set(touched)
    finally:
        ranges.unpersist()


def cleanup(store, p, snap):
    """After the commit: state directories no date refers to any more."""
    for name in STATE:
        live = set(snap["state"][name].values())
        base = storage.join(p.out, "_state", name)
        for d in store.listdir(base):
            if d.startswith("run=") and int(d[4:]) not in live:
                store.delete(storage.join(base, d))
            elif d.startswith("run="):
                r = int(d[4:])
                for day in store.listdir(storage.join(base, d)):
                    if day.startswith("date=") and snap["state"][name].get(day[5:]) != r:
                        store.delete(storage.join(base, d, day))


def reset(store, out, checkpoint=None):
    """Forget what the incremental mode has seen (the next run reads everything again)."""
    for path in (checkpoint or storage.join(out, "_checkpoint"), storage.join(out, "_staging"),
                 storage.join(out, "_state")):
        store.delete(path)

"""The incremental run: read only the files not seen before, and recompute only the hours they touch.

A run (number N) goes through three steps, each safe to repeat if the process dies:
  1. note the new files (CHECKPOINT/pending-N.json) and stage their usable records as Parquet,
     partitioned by the date and hour of ts (OUT/_staging/run=N/date=D/hour=H; a repeated run
     deletes and rewrites its own staging);
  2. recompute what those hours change, from the staged records (so a repeat computes the same):
       clean          the touched hours' partitions, from every run's staged records of those hours
                      (and of any hour whose seq range overlaps theirs on a device: copies meet there)
       device_window  the touched hours' partitions, plus any hour whose windows chain to them
                      (a device's windows link by min_seq: an untouched hour right after a touched
                      one, or one whose seq range overlaps it, is recomputed too)
       state          in OUT/_state/run=N/date=D/kind=K, each touched day's hourly partials
                      (metrics.hour_windows, hour_records, histogram; the recomputed hours' rows
                      in place of the old ones) and its rollups made anew from them
                      (metrics.merge_windows, hour_counts, fleet_hourly: a few rows per device,
                      the four in one kind=rollup; merge_records per boot, kind=rday); in
                      OUT/_state/run=N/date=total, the histograms' total over every hour (the last
                      total, minus the recomputed hours' old counts, plus their new ones), every
                      day's window links (per device, its seq range and last window: the last
                      links, the touched days' made anew) and the boots summed up to the edge, the
                      day before the last (carried over when the edge moves; made anew from every
                      day's per-boot rows when a run's hours reach before the last edge or bring a
                      boot_id already summed up). Every other day's state stays where an earlier
                      run wrote it: a run writes what its hours change, not the history. It reads
                      the touched days' hourly partials, the other days' window links (which hours
                      chain to the touched ones), every day's rollups, the total and the per-boot
                      rows since the edge, which device_health, firmware_cohort, outliers, the
                      report and quality.json are merged from
  3. commit: CHECKPOINT/state-N.json (files seen, counts, which run holds each date's partials
     and the total). Until then the last commit's state is untouched (run N writes only under
     run=N), so a run that dies leaves it usable.
A run that finds no new file changes nothing but quality.json's new_files/new_records, and starts
no Spark job.
"""

import datetime as dt
import json

from pyspark.sql import Window
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from fleetwire.host.analytics import job, landing, metrics, session, storage
from fleetwire.host.analytics import schema as S

VERSION = 5
DAY_MS = 24 * metrics.HOUR_MS
TOTAL = "total"  # the state's "date" that holds the histograms' total over every hour
HOURLY = ["window", "record", "histogram"]  # the state's hourly partials, kept per date
ROLLUPS = ["wday", "fwh", "devh", "fleet"]  # per day, what the tables merge from
# The rollups of a day are kept in one directory (kind=rollup): every run reads all of them, from
# one small file a day instead of four (a month: 32 files, not 125). A day's per-boot records
# (kind=rday) are read only when the boots' figures are made anew
ROLLUP = "rollup"
# in date=TOTAL, besides the histograms' total (kind=total) and every day's window links
# (kind=links), the boots by the edge (the day before the state's last): the figures over the days
# before it of each boot seen since it or highest on its device, as merge_records rows (kind=bbase),
# and per device the sums over the other boots and their highest boot_id (kind=bdev)
BOOT = ["device_id", "boot_id", "records", "unexpected_resets", "crashed", "hn", "hu", "hh", "huh", "huu"]
BDEV = ["device_id", "_boots", "_sxy", "_sxx", "_top"]


def _kind_dir(kind):
    return ROLLUP if kind in ROLLUPS else kind


class Checkpoint:
    """The incremental run's own files: committed snapshots and the run in progress."""

    def __init__(self, store, root):
        self.store, self.root = store, root

    def _runs(self, prefix):
        out = []
        for name in self.store.listdir(self.root):
            if name.startswith(prefix) and name.endswith(".json"):
                try:
                    out.append(int(name[len(prefix) : -len(".json")]))
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
            if m < n:  # committed after all: the note is stale
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
    return {
        "version": VERSION,
        "run": 0,
        "seen": {},
        "counts": {},
        "files": 0,
        "hours": {},
        "kept": {},
        "state": {},
        "ts_min": None,
        "ts_max": None,
        "format": None,
        "since_ms": None,
        "quality": None,
        "schema": None,  # of the state's rows (JSON), as the last run wrote them
    }


def _rel(root, uri):
    """uri relative to the landing zone's root: the name the checkpoint knows a file by (so that the
    zone, moved or named by another URI of the same place, still has its files seen)."""
    if storage.is_local(root) and storage.is_local(uri):  # file:/x, file:///x and /x are one place
        root, uri = storage.local_path(root), storage.local_path(uri)
    base = root.rstrip("/") + "/"
    return uri[len(base) :] if uri.startswith(base) else uri


def _abs(root, rel):
    """The URI of a file the checkpoint names relative to the landing zone (as the listing gives it:
    file:///x for a local zone)."""
    if storage.scheme(rel) is not None or rel.startswith("/"):
        return rel
    if storage.is_local(root):
        return "file://" + storage.join(storage.local_path(root), rel)
    return storage.join(root, rel)


def _date():
    """The state's `date` (yyyy-MM-dd, UTC) of a row's hour_ms, as a column (_day: of one hour)."""
    return F.date_format(F.timestamp_millis("hour_ms"), "yyyy-MM-dd")


def _day(hour_ms):
    return dt.datetime.fromtimestamp(int(hour_ms) // 1000, dt.timezone.utc).strftime("%Y-%m-%d")


def _day_ms(day):
    return int(dt.datetime.strptime(day, "%Y-%m-%d").replace(tzinfo=dt.timezone.utc).timestamp()) * 1000


def _hour_dir(hour_ms):
    return dt.datetime.fromtimestamp(int(hour_ms) // 1000, dt.timezone.utc).strftime("date=%Y-%m-%d/hour=%-H")


def run(spark, store, cfg, p):
    ck = Checkpoint(store, p.checkpoint)
    snap = ck.load()
    if snap["run"] and snap.get("version") != VERSION:
        raise landing.InputError(
            "the checkpoint %s was made by an older fleetwire (state version %s, this one reads %d): "
            "run once with --reset (or delete it, OUT/_staging and OUT/_state): that run reads everything"
            % (p.checkpoint, snap.get("version"), VERSION)
        )
    for key, value in (("format", cfg.fmt), ("since_ms", cfg.since_ms)):
        if snap[key] is not None and snap[key] != value and snap["run"]:
            raise landing.InputError(
                "the checkpoint %s was made with %s %s, not %s: use another --out/--checkpoint "
                "for a different input"
                % (p.checkpoint, "--format" if key == "format" else "--since", snap[key], value)
            )
    n = snap["run"] + 1
    staging = storage.join(p.out, "_staging")
    note = ck.pending(n)
    unreadable = []
    if note is None:
        files, unreadable, size = job.scan(store, cfg, p, cfg.since_ms)
        new = [f for f in files if _rel(p.input, f) not in snap["seen"]]
        if not new:
            return nothing_new(store, cfg, p, snap, unreadable, spark)
        # their size (read splits and partitions follow it): their share of the listed files'
        note = {"files": [_rel(p.input, f) for f in new], "bytes": size * len(new) // len(files)}
        ck.write_pending(n, note)
    else:
        cfg.log("incremental: finishing run %d, which stopped before it committed" % n)
    if "hours" not in note:
        note.update(stage(spark, store, cfg, p, n, note["files"], note.get("bytes", 0), staging))
        ck.write_pending(n, note)
    cfg.log(
        "incremental: %d new files, %d new usable records" % (len(note["read"]), note["counts"].get("", 0))
    )

    hours = snap["hours"]
    for h in note["hours"]:
        hours.setdefault(str(h), [])
        if n not in hours[str(h)]:
            hours[str(h)].append(n)
    counts = dict(snap["counts"])
    for k, v in note["counts"].items():
        counts[k] = counts.get(k, 0) + v
    snap.update(
        run=n, counts=counts, files=snap["files"] + len(note["read"]), format=cfg.fmt, since_ms=cfg.since_ms
    )
    for f in note["read"]:
        snap["seen"][f] = 1
    if note["ts_min"] is not None:
        snap["ts_min"] = note["ts_min"] if snap["ts_min"] is None else min(snap["ts_min"], note["ts_min"])
        snap["ts_max"] = note["ts_max"] if snap["ts_max"] is None else max(snap["ts_max"], note["ts_max"])

    q = landing.summarize(
        {(None if k == "" else k): v for k, v in counts.items()}, snap["files"], unreadable, note["vanished"]
    )
    if q["valid_records"] == 0:
        raise landing.InputError(
            "no usable records in %s: %s"
            % (cfg.input, "; ".join(line.strip() for line in landing.describe(q)))
        )
    rewritten, report_path = set(), None
    if note["hours"]:
        new = note["counts"].get("", 0)
        rewritten, report_path = derive(spark, store, cfg, p, snap, n, note["hours"], new, staging, q)
    else:  # nothing usable in the new files: tables as they were, but for the crash records'
        q["clean_records"] = int(sum(snap["kept"].values()))
        q["duplicates"] = q["valid_records"] - q["clean_records"]
        if store.exists(p.table("firmware_cohort")):
            from fleetwire.host.analytics import commands, crashes

            if crashes.changed(store, p.input, p.out):
                job.write_crashes(spark, store, p, cfg.symbols)
            if commands.changed(store, p.input, p.out):
                job.write_commands(spark, store, p)
    q["new_files"], q["new_records"] = len(note["read"]), note["counts"].get("", 0)
    store.write_text(storage.join(p.out, "quality.json"), json.dumps(q, indent=2, sort_keys=True))
    snap["quality"] = q
    ck.commit(snap)
    cleanup(store, p, snap)
    for line in landing.describe(q):
        cfg.log(line)
    return job.Result(
        p.out,
        {t: p.table(t) for t in S.TABLES},
        q,
        0.0,
        report_path,
        new_records=q["new_records"],
        new_files=q["new_files"],
        hours=sorted(rewritten),
    )


def nothing_new(store, cfg, p, snap, unreadable, spark=None):
    cfg.log("incremental: 0 new files, 0 new usable records")
    if spark is not None and store.exists(p.table("firmware_cohort")):
        from fleetwire.host.analytics import commands, crashes

        # crash records and command events land beside the telemetry, not in it
        if crashes.changed(store, p.input, p.out):
            job.write_crashes(spark, store, p, cfg.symbols)
        if commands.changed(store, p.input, p.out):
            job.write_commands(spark, store, p)
    path = storage.join(p.out, "quality.json")
    q = dict(snap["quality"])
    q["new_files"], q["new_records"] = 0, 0
    q["unreadable_files"] = [{"path": f, "reason": r} for f, r in unreadable]
    q["vanished_files"] = []
    store.write_text(path, json.dumps(q, indent=2, sort_keys=True))
    return job.Result(
        p.out, {t: p.table(t) for t in S.TABLES}, q, 0.0, None, new_records=0, new_files=0, hours=[]
    )


def stage(spark, store, cfg, p, n, rel_files, size, staging):
    """Read the new files (`size` bytes) once: count their records by problem and stage the usable ones."""
    target = storage.join(staging, "run=%d" % n)
    store.delete(target)
    job.phase(spark, "stage new files")
    files = [_abs(p.input, f) for f in rel_files]
    shape = session.tune(spark, size, cfg.fmt, cfg.partitions)

    problems = [*landing.PROBLEMS, landing.FILTERED]  # every `_problem` classify() gives

    def action(classified):
        # the counts are observed while the staging is written: one pass, one Spark job
        from pyspark.sql import Observation

        c = metrics.with_time_columns(classified)
        ok = F.col("_problem").isNull()
        obs = Observation()
        c = c.observe(
            obs,
            F.count(F.lit(1)).alias("all"),
            F.count_if(ok).alias("valid"),
            *[F.count_if(F.col("_problem") == k).alias(k) for k in problems],
            F.collect_set(F.when(ok, F.col("hour_ms"))).alias("hours"),
            F.min(F.when(ok, F.col("ts"))).alias("lo"),
            F.max(F.when(ok, F.col("ts"))).alias("hi"),
        )
        valid = c.filter(ok).select(*S.FIELD_NAMES, "date", "hour")
        if shape["small"]:  # an hour's files or so: the task that reads them writes them
            valid = valid.coalesce(1)
        else:  # each hour's records to one task (a file an hour, not one per task and hour)
            valid = valid.repartition(max(1, shape["cores"]), "date", "hour")
        job.write(valid, target, ("date", "hour"))
        return obs.get

    m, read, vanished = job.read_records(spark, store, files, cfg, action)
    counts = {("" if k == "valid" else k): m[k] for k in problems + ["valid"] if m[k]}
    if sum(counts.values()) != m["all"]:  # a `_problem` missing from `problems`
        raise RuntimeError("staging counted %s of %d records" % (counts, m["all"]))
    lo, hi, hours = m["lo"], m["hi"], {int(h) for h in m["hours"]}
    return {
        "read": [_rel(p.input, f) for f in read],
        "vanished": vanished,
        "counts": counts,
        "hours": sorted(hours),
        "ts_min": lo,
        "ts_max": hi,
    }


def _state_paths(p, snap, dates=None):
    """The committed state's directories (one per date, and TOTAL's), or only those of `dates`."""
    return [
        storage.join(p.out, "_state", "run=%d" % r, "date=" + d)
        for d, r in sorted(snap["state"].items())
        if dates is None or d in dates
    ]


def _read_kinds(spark, snap, paths, kinds):
    """The state's rows of those kinds under the given dates' directories (`_kind` tells them apart
    once read), with the schema the last run wrote (no job to read it from the files). Each
    directory is read as it is, without partition discovery (date=total beside date=2026-01-05
    would conflict)."""
    dirs = sorted({_kind_dir(k) for k in kinds})
    pattern = dirs[0] if len(dirs) == 1 else "{%s}" % ",".join(dirs)
    schema = StructType.fromJson(json.loads(snap["schema"]))
    df = spark.read.schema(schema).parquet(*[storage.join(path, "kind=" + pattern) for path in paths])
    if ROLLUP in dirs and not set(ROLLUPS) <= set(kinds):  # some of a directory's kinds only
        df = df.filter(F.col("_kind").isin(*kinds))
    return df


def _staged(spark, snap, staging, hours):
    paths = [
        storage.join(staging, "run=%d" % r, _hour_dir(h))
        for h in sorted(hours)
        for r in snap["hours"][str(h)]
    ]
    return spark.read.schema(S.spark_schema(with_corrupt=False)).parquet(*paths)


def derive(spark, store, cfg, p, snap, n, touched, new, staging, q):
    """Recompute what the touched hours change (`new` usable records staged for them), update the
    state of their days and merge the tables from the daily rollups. Returns (hours whose
    device_window partitions were rewritten, report URI)."""
    cached = []
    try:
        # the touched hours' staged records: what this run deduplicates (its partitions follow)
        records = new + sum(snap["kept"].get(str(h), 0) for h in touched)
        shape = session.tune(spark, records * session.BYTES_PER_RECORD["parquet"], "parquet", cfg.partitions)
        job.phase(spark, "hours to recompute")
        known = sorted(d for d in snap["state"] if d != TOTAL)
        redo, follow, before, cand, boots_anew = set(touched), set(), None, None, True

        def deduplicate(staged, also=()):  # staged records, all valid
            staged = staged.withColumn("_problem", F.lit(None).cast("string"))
            return job.deduplicate(staged, shape["partitions"], per_hour=True, also=also)

        if known:
            staged_t = _staged(spark, snap, staging, touched)
            # the touched days' hours, each as one row of window links; every other day as one row
            # (its seq range and last window, from the daily rollups)
            near = sorted({_day(h) for h in touched} & set(known))
            far = sorted(set(known) - set(near))
            hw = _read_kinds(spark, snap, _state_paths(p, snap, near), ["window"]) if near else None
            day_links = _day_links(spark, p, snap, near) if far else None
            closed = _total(spark, p, snap, "bdev")
            last, clashes = after_the_rest(staged_t, hw, day_links, closed, touched)
            cached.append(last)
            # the usual case assumed: the touched hours deduplicated in the job that checks it
            job.phase(spark, "clean (recomputed hours)")
            cand, rows, (check,) = deduplicate(staged_t, also=[clashes])
            cached.append(cand)
            if not check["_clashes"]:
                before = last.filter(F.col("min_seq").isNotNull()).select("device_id", "min_seq", "_rec_last")
                # and no new boot_id is one of the boots the state has summed up
                boots_anew = check["_older_boots"] > 0
            else:
                cand.unpersist()
                cand = None
                job.phase(spark, "hours to recompute")
                # a clock or a seq counter went back: which hours overlap or follow theirs, from
                # each hour's and each day's window links (kept: the queries below read them again)
                links = day_links
                if hw is not None:
                    links = _links(hw) if links is None else _links(hw).unionByName(links)
                links = links.persist(job.CACHE)
                cached.append(links)
                mine = (  # the touched hours' seq ranges per device, from their staged records
                    staged_t.withColumn("hour_ms", F.col("ts") - F.pmod("ts", F.lit(metrics.HOUR_MS)))
                    .groupBy("device_id", "hour_ms")
                    .agg(F.min("seq").alias("first"), F.max("seq").alias("last"))
                )
                redo, follow = related(links, mine, touched)
                if day_links is not None and not before_them(day_links, links, mine, redo | follow):
                    # another day's seqs reach into or past theirs: which of its hours overlap or
                    # follow, from every hour's window links
                    links = _links(_read_kinds(spark, snap, _state_paths(p, snap, known), ["window"]))
                    links = links.persist(job.CACHE)
                    cached.append(links)
                    redo, follow = related(links, mine, touched)
                # the windows before the recomputed ones: whole days are entirely before them (else
                # they would overlap or follow), so each day's last window is the one that can chain
                before = links.filter(~F.col("hour_ms").isin(*sorted(redo | follow)))

        # clean: every hour to recompute, from every run's staged records of it (deliveries of one
        # (device_id, seq) in different hours meet here: their hours' seq ranges overlap)
        if cand is None:
            job.phase(spark, "clean (recomputed hours)")
            cand, rows = deduplicate(_staged(spark, snap, staging, redo))
            cached.append(cand)
        for h in redo:
            snap["kept"][str(h)] = 0
        for r in rows:
            snap["kept"][str(r["hour_ms"])] = r["kept"]
        q["clean_records"] = int(sum(snap["kept"].values()))
        q["duplicates"] = q["valid_records"] - q["clean_records"]
        k = job.writers(sum(r["kept"] for r in rows), len(redo), shape)
        clean = metrics.clean_records(cand)
        job.write(
            clean.select(*metrics.CLEAN_COLUMNS), p.table("clean"), ("date", "hour"), files=k, dynamic=True
        )

        # device_window: those hours and the ones whose first windows chain to them
        job.phase(spark, "device_window (recomputed hours)")
        windows = redo | follow
        clean_w = clean
        if follow:
            kept = spark.read.parquet(*[storage.join(p.table("clean"), _hour_dir(h)) for h in sorted(follow)])
            kept = metrics.clean_records(kept.withColumn("_problem", F.lit(None).cast("string")))
            clean_w = clean.unionByName(kept.select(*clean.columns))
        win = metrics.link(metrics.windows(clean_w), before).select(*metrics.WINDOW_KEPT).persist(job.CACHE)
        cached.append(win)
        job.write(
            win.select(*metrics.WINDOW_COLUMNS),
            p.table("device_window"),
            ("date", "hour"),
            files=k,
            dynamic=True,
        )

        job.phase(spark, "state of the touched days")
        days = sorted({_day(h) for h in windows})
        # an hour's records or so: the state of their days is a few rows per device and hour, made
        # in one task without a shuffle (six shuffles of a few thousand rows cost more than it)
        one = shape["small"]
        state, cols = new_state(
            spark, p, snap, days, redo, windows, win, clean, cached, shape["cores"], one, boots_anew
        )
        job.write(
            state,
            storage.join(p.out, "_state", "run=%d" % n),
            ("date", "kind"),
            files=1 if one else None,
            single=not one,
        )
        for d in days + [TOTAL]:
            snap["state"][d] = n
        snap["schema"] = StructType([f for f in state.schema.fields if f.name not in ("date", "kind")]).json()

        # the tables, from every day's rollups and the histograms' total, as written (small files:
        # a plain scan, where the write's plan would make every query on it costly to plan)
        job.phase(spark, "merge the days")
        # partitioned by device: device_health groups and joins within those partitions. The boots
        # seen since the edge: their figures before it, merged with their records since
        st = _read_kinds(spark, snap, _state_paths(p, snap), ROLLUPS + ["total", "bbase", "bdev"])
        edge = _day_before(_last_day(snap))
        since = [d for d in snap["state"] if d != TOTAL and d >= edge]
        st = st.unionByName(_read_kinds(spark, snap, _state_paths(p, snap, since), ["rday"]))
        st = st.repartition(max(1, shape["cores"]), "device_id").persist(job.CACHE)
        cached.append(st)

        def kind(k):
            return st.filter(F.col("_kind") == k).select(*cols[k])

        seen = metrics.merge_records(kind("bbase").unionByName(kind("rday")), ["device_id", "boot_id"])
        boots = _add_up(metrics.boot_moments(seen, top=True).unionByName(kind("bdev")))
        parts = job.Partials(
            kind("wday"), None, kind("total"), kind("fwh"), kind("devh"), kind("fleet"), boots=boots
        )
        first_hour = snap["ts_min"] - snap["ts_min"] % metrics.HOUR_MS
        report_path = job.finish(spark, store, cfg, p, parts, q, snap["ts_max"], first_hour)
        return windows, report_path
    finally:
        for df in cached:
            df.unpersist()


def new_state(spark, p, snap, days, redo, windows, win, clean, cached, n_parts, one=False, boots_anew=True):
    """The state of the touched days (their hourly partials, the recomputed hours' rows in place of
    the old, and the daily rollups made from them), the histograms' new total, the days' window
    links and the boots' figures: (one DataFrame with `date` and `kind`, {kind: its columns}). Every
    other day's state stays as it is. one: the inputs are brought into one partition (which every
    grouping then runs in, without a shuffle) instead of n_parts by device. boots_anew: the boots'
    state made from every day's per-boot records (else from the last state's and the days since its
    edge: only when none of the recomputed hours is before that edge and no new boot_id is one it
    has summed up)."""

    def few(df):  # into the one partition, or left as it is
        return df.coalesce(1) if one else df

    day = F.col("hour_ms") - F.pmod("hour_ms", F.lit(DAY_MS))
    fresh = {
        "window": (metrics.hour_windows(win), windows),
        "record": (metrics.hour_records(clean), redo),
        "histogram": (metrics.histogram(few(clean), by_hour=True), redo),
    }
    old_days = [d for d in days if d in snap["state"]]
    old = None
    if old_days:
        old = few(_read_kinds(spark, snap, _state_paths(p, snap, old_days), HOURLY)).persist(job.CACHE)
        cached.append(old)
    hourly = {}
    for kind, (rows_new, hrs) in fresh.items():
        m = rows_new
        if old is not None:
            m = (
                old.filter((F.col("_kind") == kind) & ~F.col("hour_ms").isin(*sorted(hrs)))
                .select(*rows_new.columns)
                .unionByName(rows_new)
            )
        hourly[kind] = m
    # partitioned by device: every rollup below but fleet_hourly groups within those partitions
    by_device = few if one else (lambda df: df.repartition(max(1, n_parts), "device_id"))
    hw, hr = (by_device(hourly[k]).persist(job.CACHE) for k in ("window", "record"))
    cached += [hw, hr]
    fw_hours, dev_hours = metrics.hour_counts(hr, DAY_MS)
    kinds = {
        "window": hw,
        "record": hr,
        "histogram": hourly["histogram"],
        "wday": metrics.merge_windows(hw, DAY_MS),
        "rday": metrics.merge_records(
            hr.withColumn("hour_ms", day), ["device_id", "hour_ms", "fw_version", "boot_id"]
        ),
        "fwh": fw_hours,
        "devh": dev_hours,
        "fleet": metrics.fleet_hourly(hw),
    }
    # `kind` partitions the dataset (a run reads only the kinds it needs; the rollups are read
    # together); `_kind` tells the rows apart once read. A rollup's hour_ms is its day's first hour
    # (fleet's: its hour)
    parts = [
        df.withColumns({"kind": F.lit(_kind_dir(k)), "_kind": F.lit(k), "date": _date()})
        for k, df in kinds.items()
    ]
    # the histograms' total over every hour (release percentiles need only that): the last total,
    # minus the recomputed hours' old counts, plus their new ones
    hist_cols = ["fw_version", "metric", "value", "n"]
    terms = [fresh["histogram"][0].select(*hist_cols)]
    if old is not None:
        terms.append(
            old.filter((F.col("_kind") == "histogram") & F.col("hour_ms").isin(*sorted(redo))).select(
                "fw_version", "metric", "value", (-F.col("n")).alias("n")
            )
        )
    if TOTAL in snap["state"]:
        terms.append(_read_kinds(spark, snap, _state_paths(p, snap, [TOTAL]), ["total"]).select(*hist_cols))
    total = terms[0]
    for t in terms[1:]:
        total = total.unionByName(t)
    total = (
        few(total).groupBy("fw_version", "metric", "value").agg(F.sum("n").alias("n")).filter(F.col("n") != 0)
    )
    parts.append(total.withColumns({"kind": F.lit("total"), "_kind": F.lit("total"), "date": F.lit(TOTAL)}))
    # every day's window links (its seq range and last window per device) in one small file: what
    # the next run's check reads, instead of every day's rollups
    links = _links(kinds["wday"])
    if TOTAL in snap["state"]:
        links = _day_links(spark, p, snap, days).unionByName(links)
    links = few(links).withColumns({"kind": F.lit("links"), "_kind": F.lit("links"), "date": F.lit(TOTAL)})
    parts.append(links)
    # the boots, by the edge: the day before the last (an hour's file holds records of the hour
    # before, and at midnight of the day before). Each device's boots seen since the edge and its
    # highest boot before it (which may go on), with their figures over the days before the edge
    # (merged with the per-boot records since when the tables are made); per device, the sums over
    # the others, which no later day changes while no new boot_id is one of theirs
    known = {d for d in snap["state"] if d != TOTAL}
    prev = _last_day(snap)
    edge = _day_before(max(days + ([prev] if prev else [])))
    if boots_anew or prev is None or min(days) < _day_before(prev):
        base = closed = None
        before = sorted(known | set(days))
    else:
        tot = _total(spark, p, snap, "bbase", "bdev")
        base = tot.filter(F.col("_kind") == "bbase").select(*BOOT)
        closed = tot.filter(F.col("_kind") == "bdev").select(*BDEV)
        before = sorted(d for d in known | set(days) if d >= _day_before(prev))
    since = [d for d in before if d >= edge]
    before = [d for d in before if d < edge]
    if before:  # a new edge (or made anew): the boots summed up to it
        rows = _rday(spark, p, snap, before, days, kinds["rday"]).select(*BOOT)
        if base is not None:
            rows = base.unionByName(rows)
        per = metrics.merge_records(few(rows), ["device_id", "boot_id"])
        seen = _rday(spark, p, snap, since, days, kinds["rday"]).select("device_id", "boot_id")
        seen = few(seen.distinct().withColumn("_seen", F.lit(True)))
        per = per.withColumn("_top", F.max("boot_id").over(Window.partitionBy("device_id")))
        per = per.join(seen, ["device_id", "boot_id"], "left")
        keep = (F.col("boot_id") == F.col("_top")) | F.col("_seen").isNotNull()
        base = per.filter(keep).select(*BOOT)
        gone = metrics.boot_moments(per.filter(~keep), top=True)
        closed = gone if closed is None else _add_up(gone.unionByName(closed))
    elif base is None:  # every record since the edge: nothing before it (empty, for the columns)
        base = kinds["rday"].select(*BOOT).filter(F.lit(False))
        closed = metrics.boot_moments(base, top=True)
    for k, df in (("bbase", base), ("bdev", closed)):
        parts.append(few(df).withColumns({"kind": F.lit(k), "_kind": F.lit(k), "date": F.lit(TOTAL)}))
    state = parts[0]
    for part in parts[1:]:
        state = state.unionByName(part, allowMissingColumns=True)
    cols = {k: df.columns for k, df in kinds.items()}
    cols.update(total=hist_cols, bbase=BOOT, bdev=BDEV, rday=BOOT)
    return state, cols


def _add_up(sums):
    """Rows of metrics.boot_moments(top=True) added up per device."""
    return sums.groupBy("device_id").agg(*[F.sum(c).alias(c) for c in BDEV[1:4]], F.max("_top").alias("_top"))


def _last_day(snap):
    return max((d for d in snap["state"] if d != TOTAL), default=None)


def _day_before(day):
    return (dt.date.fromisoformat(day) - dt.timedelta(days=1)).isoformat()


def _total(spark, p, snap, *kinds):
    """Those kinds of the state's date=TOTAL (read beside its window links, which every state has:
    a kind without rows has no directory)."""
    df = _read_kinds(spark, snap, _state_paths(p, snap, [TOTAL]), ["links", *kinds])
    return df.filter(F.col("_kind").isin(*kinds))


def _rday(spark, p, snap, dates, fresh_dates, fresh):
    """The per-boot records (kind rday) of those dates as this run leaves them: `fresh` for
    fresh_dates, the committed state's for the others."""
    new = [d for d in dates if d in fresh_dates]
    old = [d for d in dates if d not in fresh_dates]
    df = fresh.filter(_date().isin(*new)) if new else None
    if old:
        o = _read_kinds(spark, snap, _state_paths(p, snap, old), ["rday"]).select(*fresh.columns)
        df = o if df is None else o.unionByName(df)
    return df


def after_the_rest(staged, hw, days, closed, touched):
    """The usual run's check: on every device, do the touched hours' seqs (their staged records',
    and their old window partials') all come after every other hour's? Then no other hour overlaps
    or follows them, they alone are recomputed, and their first window chains to the device's last
    earlier one. hw: the touched days' hourly window partials; days: the other days' window links.
    And is none of their boot_ids one the state has summed up (closed: per device, their highest)?
    One aggregate by device. Returns (per device: that last earlier window (min_seq, _rec_last) as
    link()'s `before` wants it, cached; a one-row DataFrame counting the devices where the answer is
    no, `_clashes`, and where a boot_id is summed up, `_older_boots`), both still to be computed."""
    t = F.col("hour_ms").isin(*sorted(touched))
    none = F.lit(None).cast("long")
    rows = staged.select(
        "device_id",
        none.alias("hi"),
        F.col("seq").cast("long").alias("lo"),
        none.alias("last_min_seq"),
        none.alias("last_rec"),
        F.col("boot_id").cast("long").alias("boot"),
    )
    # (the rows of each source have the columns it gives; the others are null)
    rows = rows.unionByName(closed.select("device_id", F.col("_top").alias("last_boot")), True)
    if hw is not None:
        rows = rows.unionByName(
            hw.select(
                "device_id",
                F.when(~t, F.col("max_seq")).alias("hi"),
                F.when(t, F.col("min_seq")).alias("lo"),
                F.when(~t, F.col("last_min_seq")).alias("last_min_seq"),
                F.when(~t, F.col("last_rec")).alias("last_rec"),
            ),
            True,
        )
    if days is not None:
        rows = rows.unionByName(
            days.select(
                "device_id",
                F.col("last").alias("hi"),
                none.alias("lo"),
                F.col("min_seq").alias("last_min_seq"),
                F.col("_rec_last").alias("last_rec"),
            ),
            True,
        )
    per = rows.groupBy("device_id").agg(
        F.max("hi").alias("hi"),
        F.min("lo").alias("lo"),
        F.max("last_min_seq").alias("min_seq"),
        F.max_by("last_rec", "last_min_seq").alias("_rec_last"),
        F.min("boot").alias("boot"),
        F.max("last_boot").alias("last_boot"),
    )
    per = per.persist(job.CACHE)
    return per, per.agg(
        F.count_if(F.col("hi") >= F.col("lo")).alias("_clashes"),
        F.count_if(F.col("boot") <= F.col("last_boot")).alias("_older_boots"),
    )


def _day_links(spark, p, snap, but):
    """Every day's window links (as _links gives them from its rollups) but those of the dates `but`,
    from the one file that holds them all."""
    df = _read_kinds(spark, snap, _state_paths(p, snap, [TOTAL]), ["links"])
    return df.filter(~F.col("hour_ms").isin(*[_day_ms(d) for d in sorted(but)])).select(*LINKS)


def before_them(days, links, mine, hours):
    """True when every day in `days` (one links row per device and day) ends, on its device, before
    the first seq of every hour to recompute (mine: the touched hours' new ranges; links: the
    others' old ones): then nothing of it overlaps or follows them, and its last window is the only
    one of it that can chain to theirs."""
    ours = mine.select("device_id", "first").unionByName(
        links.filter(F.col("hour_ms").isin(*sorted(hours))).select("device_id", "first")
    )
    low = ours.groupBy("device_id").agg(F.min("first").alias("_low"))
    clash = days.join(low, "device_id").filter(F.col("last") >= F.col("_low"))
    return not clash.agg(F.count(F.lit(1))).first()[0]  # one job (limit(1) may take several)


LINKS = ["device_id", "hour_ms", "first", "last", "min_seq", "_rec_last"]


def _links(hw):
    """Per (device, hour_ms) of hour_windows or merge_windows rows: the seq range (first, last) and
    the last window (min_seq, _rec_last) that a later one chains to."""
    return hw.groupBy("device_id", "hour_ms").agg(
        F.min("min_seq").alias("first"),
        F.max("max_seq").alias("last"),
        F.max("last_min_seq").alias("min_seq"),
        F.max_by("last_rec", "last_min_seq").alias("_rec_last"),
    )


def related(links, mine, touched):
    """(hours to recompute with the touched ones, hours whose windows only need relinking).
    `mine`: the touched hours' seq ranges per device (all their staged records). One that overlaps
    another hour's on the same device means deliveries that may be copies of each other, or windows
    that interleave (a clock that went back, a seq counter that restarted): those hours are
    recomputed together, until no more overlap. Then each device's first hour after a run of
    recomputed hours is relinked (its first window chains to a recomputed one): for each of ours,
    the next hour of its device in seq order. Ours are a few rows a device: sent to every task
    (broadcast) and matched there, so history is scanned, never shuffled. One small query,
    repeated only for overlaps."""
    hours, ours = set(touched), mine
    while True:
        rest = links.filter(~F.col("hour_ms").isin(*sorted(hours))).select(*ours.columns)
        o = F.broadcast(ours.select(F.col("device_id").alias("_d"), F.col("first").alias("_f"), "last"))
        pairs = rest.join(o.withColumnRenamed("last", "_l"), F.col("device_id") == F.col("_d"))
        overlaps = (F.col("first") <= F.col("_l")) & (F.col("_f") <= F.col("last"))
        # per one of ours, in one pass over the pairs (one broadcast): the hours that overlap it,
        # and the next hour after it (one with the same first seq overlaps it: strictly after)
        found = (
            pairs.groupBy("_d", "_f")
            .agg(
                F.collect_set(F.when(overlaps, F.col("hour_ms"))).alias("overlap"),
                F.min_by("hour_ms", F.when(F.col("first") > F.col("_f"), F.col("first"))).alias("after"),
            )
            .collect()
        )
        more = {h for r in found for h in r["overlap"]} - hours
        if not more:
            return hours, {r["after"] for r in found if r["after"] is not None} - hours
        hours |= more
        ours = ours.unionByName(links.filter(F.col("hour_ms").isin(*sorted(more))).select(*ours.columns))


def cleanup(store, p, snap):
    """After the commit: the state written by earlier runs for dates a later run has rewritten."""
    live = set(snap["state"].values())
    base = storage.join(p.out, "_state")
    for d in store.listdir(base):
        if not d.startswith("run="):
            continue
        r = int(d[4:])
        if r not in live:
            store.delete(storage.join(base, d))
            continue
        for day in store.listdir(storage.join(base, d)):
            if day.startswith("date=") and snap["state"].get(day[5:]) != r:
                store.delete(storage.join(base, d, day))


def reset(store, out, checkpoint=None):
    """Forget what the incremental mode has seen (the next run reads everything again)."""
    for path in (
        checkpoint or storage.join(out, "_checkpoint"),
        storage.join(out, "_staging"),
        storage.join(out, "_state"),
    ):
        store.delete(path)

"""Bench: the `fleetwire report` Spark job (local[2]) against a DuckDB implementation of the same
definitions (tests/analytics/analytics_reference.py), on generated fleets of 1M and 10M records.

  .venv/bin/python bench/spark_report.py                 # 1M and 10M, Parquet input
  .venv/bin/python bench/spark_report.py --sizes 1M --format ndjson
  .venv/bin/python bench/spark_report.py --sizes 10M --spark-conf spark.shuffle.compress=true

Each engine runs in its own process; the bench samples /proc for that process tree's CPU time
and peak memory (the sum of their resident sizes). "job s" is the engine's own time for
the job (Spark: after the session is up, tables written; DuckDB: the same tables, `clean`
included, computed and written),
"start s" the JVM and SparkSession start (fixed, not in "job s"), "process s" includes start-up. The
results are compared (same keys, floats within 1e-6 relative) and the Spark/DuckDB ratio printed.
For Spark, "task CPU s" is the CPU its tasks used and "JIT s" the CPU the driver JVM's JIT compiler
threads used during the job: on 2 cores they take it from the tasks.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SIZES = {"1M": 1_000_000, "10M": 10_000_000}
RECORDS_PER_DEVICE_DAY = 1486  # what the generator delivers per device in 24 h, duplicates included


def tree_stats(pid):
    """(cpu seconds, memory bytes) of a process and its descendants, from /proc: their CPU time and
    the sum of their resident sizes, leaving out a child that still shares its parent's memory. The
    JVM starts helpers (bash for Hadoop's shell commands) with posix_spawn, whose child runs in the
    JVM's own address space until it execs: counted, it doubled the JVM (a tree peak of 6.4 GiB
    beside the JVM's 3.4 GiB high-water mark). Resident sizes come from /proc/PID/stat, which the
    kernel keeps as counters: proportional set sizes (smaps_rollup) walk the JVM's page tables under
    its memory map lock, and sampling them every 0.2 s made the 10M Spark job 12 % slower
    (106.7 s against 94.8 s unsampled)."""
    tick = os.sysconf("SC_CLK_TCK")
    page = os.sysconf("SC_PAGE_SIZE")
    kids = {}
    procs = {}
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % p) as f:
                s = f.read()
            fields = s[s.rindex(")") + 2 :].split()
            ppid = int(fields[1])
            cpu = (int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14])) / tick
            mm = (int(fields[20]), int(fields[21]))  # virtual size and resident pages: alike when shared
        except (OSError, ValueError, IndexError):
            continue
        procs[int(p)] = (cpu, mm, ppid)
        kids.setdefault(ppid, []).append(int(p))
    cpu = mem = 0
    todo = [pid]
    while todo:
        p = todo.pop()
        if p in procs:
            cpu += procs[p][0]
            parent = procs.get(procs[p][2])
            if p == pid or parent is None or parent[1] != procs[p][1]:
                mem += procs[p][1][1] * page
        todo += kids.get(p, [])
    return cpu, mem


def proc_kb(pid, file, key):
    """A `KEY:   N kB` figure of /proc/PID/FILE, in bytes (None where the kernel does not give it)."""
    try:
        with open("/proc/%s/%s" % (pid, file)) as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def measure(cmd, env=None):
    """Run cmd; (its JSON line on stdout, wall s, cpu s, peak memory bytes)."""
    t0 = time.time()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    cpu = peak = 0
    while p.poll() is None:
        c, r = tree_stats(p.pid)
        cpu, peak = max(cpu, c), max(peak, r)
        time.sleep(0.2)
    out, err = p.communicate()
    wall = time.time() - t0
    if p.returncode:
        raise SystemExit("%s failed (%d):\n%s" % (cmd[2], p.returncode, err[-4000:]))
    line = [l for l in out.splitlines() if l.startswith("{")][-1]
    return json.loads(line), wall, cpu, peak


def spark_work(spark):
    """(jobs, shuffles, MiB shuffled, task CPU s) of what this session ran: Spark's status store (UI
    off or on). A shuffle is a stage that wrote shuffle output (one reused by a later job counts once);
    task CPU is the CPU time of the tasks themselves (not the JIT compiler's, the GC's or the driver's)."""
    sc = spark.sparkContext
    store = sc._jsc.sc().statusStore()
    gw = sc._gateway
    jobs = store.jobsList(None).size()
    stages = store.stageList(None, False, False, gw.new_array(gw.jvm.double, 0), None)
    shuffles = nbytes = task_ns = 0
    for i in range(stages.size()):
        st = stages.apply(i)
        task_ns += st.executorCpuTime()
        if st.shuffleWriteRecords() > 0:
            shuffles += 1
            nbytes += st.shuffleWriteBytes()
    return jobs, shuffles, nbytes / 2**20, task_ns / 1e9


def phase_work(spark):
    """({phase: [Spark jobs, shuffles]}, [(phase, job's call site)]) of what this session ran, by the
    jobs' descriptions (job.phase names them); a stage reused by a later job counts once, in the first."""
    sc = spark.sparkContext
    store = sc._jsc.sc().statusStore()
    gw = sc._gateway
    shuffled = set()
    stages = store.stageList(None, False, False, gw.new_array(gw.jvm.double, 0), None)
    for i in range(stages.size()):
        st = stages.apply(i)
        if st.shuffleWriteRecords() > 0:
            shuffled.add(st.stageId())
    out, seen, names = {}, set(), []
    jl = store.jobsList(None)
    for i in sorted(range(jl.size()), key=lambda i: jl.apply(i).jobId()):
        j = jl.apply(i)
        d = j.description()
        what = d.get() if d.isDefined() else j.name()
        what = what.replace("fleetwire report: ", "")
        w = out.setdefault(what, [0, 0])
        w[0] += 1
        names.append((what, j.name()))
        ids = j.stageIds()
        for k in range(ids.size()):
            sid = ids.apply(k)
            if sid in shuffled and sid not in seen:
                seen.add(sid)
                w[1] += 1
    return out, names


def jit_seconds(spark):
    """CPU seconds the driver JVM's JIT compiler threads (HotSpot's "C1/C2 CompilerThread") have used
    so far, from /proc: on 2 cores they take CPU from the tasks."""
    pid = spark._jvm.java.lang.ProcessHandle.current().pid()
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
                s = f.read()
        except OSError:
            continue
        name = s[s.index("(") + 1 : s.rindex(")")]
        if name.startswith(("C1 Compi", "C2 Compi")):
            fields = s[s.rindex(")") + 2 :].split()
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


def child_spark(landing, out, fmt, conf=None, incremental=False):
    sys.path.insert(0, ROOT)
    from fleetwire.host.analytics import job

    spark, start, jit0 = start_session(conf)
    marks = []  # (phase, when it began): the job names its phases (job.phase)
    named = job.phase

    def phase(spark, what):
        marks.append((what, time.time()))
        named(spark, what)

    job.phase = phase
    t = time.time()
    res = job.run(
        spark,
        job.Config(
            input=landing, out=out, fmt=fmt, report=False, incremental=incremental, log=lambda m: None
        ),
    )
    secs = time.time() - t
    ends = [m[1] for m in marks[1:]] + [t + secs]
    figures = session_figures(spark, secs, start, jit0)
    work, names = phase_work(spark)
    phases = [(what, end - began) + tuple(work.get(what, (0, 0))) for (what, began), end in zip(marks, ends)]
    spark.stop()
    print(
        json.dumps(
            dict(
                figures,
                clean=res.quality["clean_records"],
                read=res.quality["records_read"],
                new_records=res.new_records,
                hours=res.hours,
                phases=phases,
                job_names=names,
            )
        )
    )


def start_session(conf):
    """A Spark child's session (local[2], the job's settings and `conf`), the seconds the JVM and the
    session took to start (fixed, reported apart from the job) and the JIT's CPU by then."""
    from fleetwire.host.analytics import session

    t = time.time()
    spark = session.build("local[2]", app="bench", extra=conf)
    return spark, time.time() - t, jit_seconds(spark)


def session_figures(spark, secs, start, jit0):
    """What a Spark child reports of its session: the job's and the start's seconds, its Spark jobs,
    shuffles, task CPU, the JIT's CPU since jit0 and the kernel's record of the JVM's peak resident set."""
    jit = jit_seconds(spark) - jit0
    jobs, shuffles, mib, task_cpu = spark_work(spark)
    return {
        "job_s": secs,
        "start_s": start,
        "jobs": jobs,
        "shuffles": shuffles,
        "shuffled_mib": mib,
        "task_cpu_s": task_cpu,
        "jit_s": jit,
        "jvm_peak": proc_kb(spark._jvm.java.lang.ProcessHandle.current().pid(), "status", "VmHWM"),
    }


def child_floor(landing, out, fmt, conf=None):
    """The least a Spark job that writes `clean` does (--floor): read the landing zone, keep the
    usable records, shuffle them by device once, drop repeated (device_id, seq) and write them as
    Parquet by date and hour with the job's writer settings; no windows, no other table. A cold
    JVM on local[2] with the job's session settings, timed as child_spark times the job."""
    sys.path.insert(0, ROOT)
    from pyspark.sql import functions as F

    from fleetwire.host.analytics import job, metrics, session, storage
    from fleetwire.host.analytics import landing as L
    from fleetwire.host.analytics import schema as S

    spark, start, jit0 = start_session(conf)
    t = time.time()
    files, _, size = L.scan(landing, fmt, None, storage.Storage(spark))
    shape = session.tune(spark, size, fmt)
    usable = L.classify(L.read(spark, files, fmt)).filter(F.col("_problem").isNull())
    records = metrics.with_time_columns(usable).select(*S.FIELD_NAMES, "date", "hour")
    records = records.repartition(shape["partitions"], "device_id").dropDuplicates(["device_id", "seq"])
    job.write(records, storage.join(out, "clean"), ("date", "hour"))
    figures = session_figures(spark, time.time() - t, start, jit0)
    spark.stop()
    print(json.dumps(figures))


def child_duckdb(landing, out, fmt):
    sys.path.insert(0, os.path.join(ROOT, "tests", "analytics"))
    import glob
    import analytics_reference as R

    files = sorted(glob.glob(os.path.join(landing, "date=*", "hour=*", "*." + fmt)))
    os.makedirs(out, exist_ok=True)
    t = time.time()
    # the same work as the Spark job: the clean table written (Parquet, by date) and the four
    # result tables written
    ref = R.compute(files, fmt, threads=2, clean_out=os.path.join(out, "clean"))
    for name in ("device_window", "device_health", "firmware_cohort", "outliers"):
        ref[name].to_parquet(os.path.join(out, name + ".parquet"), index=False)
    secs = time.time() - t
    print(json.dumps({"job_s": secs, "clean": int(ref["clean_count"])}))


def compare(spark_out, duck_out):
    sys.path.insert(0, os.path.join(ROOT, "tests", "analytics"))
    import pandas as pd
    import analytics_reference as R

    keys = {
        "device_window": ["device_id", "window_ms"],
        "device_health": ["device_id"],
        "firmware_cohort": ["fw_version"],
        "outliers": ["device_id", "metric"],
    }
    problems = {}
    for name, k in keys.items():
        s = pd.read_parquet(os.path.join(spark_out, name))
        if name == "device_window":
            s["window_ms"] = R.to_ms(s["window_start"])
        if name == "device_health":
            s["first_ts"], s["last_ts"] = R.to_ms(s["first_seen"]), R.to_ms(s["last_seen"])
        d = R.differences(
            s, pd.read_parquet(os.path.join(duck_out, name + ".parquet")), k, rel=1e-6, abs_tol=1e-6
        )
        if d:
            problems[name] = d
    counts = [clean_counts(os.path.join(o, "clean")) for o in (spark_out, duck_out)]
    if counts[0] != counts[1]:
        problems["clean"] = "records per date differ: spark %s, duckdb %s" % tuple(counts)
    return problems


def clean_counts(path):
    """{date partition: records} of a written clean table, from the Parquet footers."""
    import pyarrow.parquet as pq

    out = {}
    for d in sorted(os.listdir(path)):
        if d.startswith("date="):
            for root, _, names in os.walk(os.path.join(path, d)):
                for n in names:
                    if n.endswith(".parquet"):
                        out[d] = out.get(d, 0) + pq.ParquetFile(os.path.join(root, n)).metadata.num_rows
    return out


def incremental_bench(a):
    """DAYS of a fleet landed and reported with --incremental; then one hour more: its incremental run
    against a batch run over that hour's files alone (--repeat times each, alternately, the hour
    always from the state the first run left), and a run with nothing new. Each run is its own
    process; "job s" leaves out the JVM's start, as above."""
    sys.path.insert(0, ROOT)
    import shutil
    from fleetwire.host.analytics import generator

    work = a.work or tempfile.mkdtemp(prefix="fleetwire-bench-")
    tag = "%dd-%ddev-%s" % (a.incremental, a.devices, a.format)
    landing, hour, out = (
        os.path.join(work, "%s-%s" % (x, tag)) for x in ("inc-landing", "inc-hour", "inc-out")
    )
    for d in (landing, hour, out, out + "-batch"):
        shutil.rmtree(d, ignore_errors=True)
    t = time.time()
    df = generator.generate(devices=a.devices, hours=a.incremental * 24 + 1, seed=1)
    cut = generator.parse_time(generator.DEFAULT_START) + a.incremental * 24 * 3600_000
    old, new = df[df.rx_ts < cut], df[df.rx_ts >= cut]
    generator.write_landing(old, landing, a.format)
    print(
        "generated %d records (%d devices, %d days + 1 hour of %d records, %s) in %.0f s"
        % (len(df), a.devices, a.incremental, len(new), a.format, time.time() - t),
        flush=True,
    )
    conf = ["--spark-conf=" + kv for kv in a.spark_conf]

    def run(engine, src, dst, what):
        info, wall, cpu, peak = measure(
            [sys.executable, os.path.abspath(__file__), "--child", engine, src, dst, a.format] + conf
        )
        print(
            "  %-46s job %6.1f s, process %6.1f s, CPU %6.1f s (tasks %.1f s, JIT %.1f s), %d Spark jobs, "
            "%d shuffles%s"
            % (
                what,
                info["job_s"],
                wall,
                cpu,
                info["task_cpu_s"],
                info["jit_s"],
                info["jobs"],
                info["shuffles"],
                ", hours rewritten: %d" % len(info["hours"]) if info.get("hours") is not None else "",
            ),
            flush=True,
        )
        print(
            "    phases: "
            + ", ".join("%s %.1f s (%d jobs, %d shuffles)" % tuple(ph) for ph in info.get("phases", [])),
            flush=True,
        )
        return dict(info, wall=wall, cpu=cpu)

    first = run("spark-incremental", landing, out, "first run")
    generator.write_landing(new, landing, a.format)
    generator.write_landing(new, hour, a.format)
    # the hour and the batch, alternately, each hour from the state the 30 days left (wall-clock
    # times on a shared machine move by a tenth from run to run: the table shows medians)
    thirty = out + "-after-first-run"
    shutil.rmtree(thirty, ignore_errors=True)
    shutil.copytree(out, thirty)
    hours, batches = [], []
    for i in range(a.repeat):
        shutil.rmtree(out, ignore_errors=True)
        shutil.copytree(thirty, out)
        hours.append(run("spark-incremental", landing, out, "one hour more (%d)" % (i + 1)))
        batches.append(run("spark", hour, out + "-batch", "batch over that hour alone (%d)" % (i + 1)))
    shutil.rmtree(thirty)
    nothing = run("spark-incremental", landing, out, "nothing new")

    def median(runs):
        return sorted(runs, key=lambda r: r["job_s"])[(len(runs) - 1) // 2]

    rows = [
        ("--incremental, the first %d days" % a.incremental, first),
        ("--incremental, one hour more", median(hours)),
        ("--incremental, nothing new", nothing),
        ("batch over that hour alone", median(batches)),
    ]
    ratio = rows[1][1]["job_s"] / rows[3][1]["job_s"]
    pairs = ", ".join("%.2fx" % (h["job_s"] / b["job_s"]) for h, b in zip(hours, batches))
    print("\n%d devices, %d days + 1 hour (%s)" % (a.devices, a.incremental, a.format))
    if a.repeat > 1:
        print("the hour and the batch: the median of %d runs each (%s run by run)" % (a.repeat, pairs))
    print()
    print("| run | records read | job s | process s | CPU s | task CPU s | JIT s | Spark jobs | shuffles |")
    print("|---|---|---|---|---|---|---|---|---|")
    for what, r in rows:
        print(
            "| %s | %s | %.1f | %.1f | %.1f | %.1f | %.1f | %d | %d |"
            % (
                what,
                r["new_records"] if r.get("new_records") is not None else r["read"],
                r["job_s"],
                r["wall"],
                r["cpu"],
                r["task_cpu_s"],
                r["jit_s"],
                r["jobs"],
                r["shuffles"],
            )
        )
    print("| one hour more / batch over that hour | | %.2fx | | | | | | |" % ratio)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1M,10M", help="comma-separated: 1M, 10M or a number of records")
    ap.add_argument("--format", choices=("parquet", "ndjson"), default="parquet")
    ap.add_argument("--work", default=None, help="working directory (default: a temporary one)")
    ap.add_argument(
        "--spark-conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting over the job's own, e.g. spark.shuffle.compress=true (repeatable)",
    )
    ap.add_argument(
        "--incremental",
        type=int,
        default=0,
        metavar="DAYS",
        help="instead: --incremental after DAYS of a fleet, then one hour more, against a batch "
        "run over that hour alone",
    )
    ap.add_argument("--devices", type=int, default=200, help="the fleet of --incremental (default 200)")
    ap.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="--incremental: runs of the hour and of the batch, alternately; medians shown (default 3)",
    )
    ap.add_argument(
        "--floor",
        action="store_true",
        help="also the least Spark job that writes `clean` (read, one shuffle, drop repeats, write): "
        "how much of DuckDB's whole job Spark's floor already takes",
    )
    ap.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if any("=" not in kv for kv in a.spark_conf):
        ap.error("--spark-conf takes KEY=VALUE")
    if a.child:
        engine, landing, out, fmt = a.child
        conf = dict(kv.split("=", 1) for kv in a.spark_conf)
        if engine == "spark-floor":
            return child_floor(landing, out, fmt, conf)
        if engine.startswith("spark"):
            return child_spark(landing, out, fmt, conf, incremental=engine == "spark-incremental")
        return child_duckdb(landing, out, fmt)
    if a.incremental:
        return incremental_bench(a)
    sys.path.insert(0, ROOT)
    from fleetwire.host.analytics import generator

    work = a.work or tempfile.mkdtemp(prefix="fleetwire-bench-")
    rows = []
    for size in a.sizes.split(","):
        n = SIZES.get(size) or int(size)
        devices = max(1, round(n / RECORDS_PER_DEVICE_DAY))
        landing = os.path.join(work, "landing-%s-%s" % (size, a.format))
        if not os.path.exists(landing):
            t = time.time()
            df = generator.generate(devices=devices, hours=24, seed=1)
            generator.write_landing(df, landing, a.format)
            print(
                "generated %d records (%d devices, 24 h, %s) in %.0f s"
                % (len(df), devices, a.format, time.time() - t),
                flush=True,
            )
            del df
        res = {}
        for engine in ("spark", "duckdb") + (("spark-floor",) if a.floor else ()):
            out = os.path.join(work, "out-%s-%s" % (size, engine))
            info, wall, cpu, peak = measure(
                [sys.executable, os.path.abspath(__file__), "--child", engine, landing, out, a.format]
                + ["--spark-conf=" + kv for kv in a.spark_conf]
            )
            res[engine] = dict(info, wall=wall, cpu=cpu, peak=peak, out=out)
            print(
                "  %-6s %s: job %.1f s, process %.1f s%s, CPU %.1f s, %.0f k rows/s, peak memory %.0f MiB%s"
                % (
                    engine,
                    size,
                    info["job_s"],
                    wall,
                    " (JVM + session start %.1f s)" % info["start_s"] if "start_s" in info else "",
                    cpu,
                    info.get("read", res["spark"]["read"]) / info["job_s"] / 1000,
                    peak / 2**20,
                    ", %d Spark jobs, %d shuffles (%.0f MiB), task CPU %.1f s, JIT %.1f s,"
                    " JVM peak resident %.0f MiB"
                    % (
                        tuple(info[k] for k in ("jobs", "shuffles", "shuffled_mib", "task_cpu_s", "jit_s"))
                        + ((info.get("jvm_peak") or 0) / 2**20,)
                    )
                    if "jobs" in info
                    else "",
                ),
                flush=True,
            )
        problems = compare(res["spark"]["out"], res["duckdb"]["out"])
        same = res["spark"]["clean"] == res["duckdb"]["clean"] and not problems
        ratio = res["spark"]["job_s"] / res["duckdb"]["job_s"]
        rows.append((size, res, ratio, same))
        print(
            "  %s: Spark/DuckDB job time %.1fx; results %s"
            % (size, ratio, "identical (floats within 1e-6)" if same else "DIFFER: %s" % problems),
            flush=True,
        )
    print(
        "\n| records | engine | job s | start s | process s | CPU s | rows/s (job) | peak memory MiB "
        "| Spark jobs | shuffles (MiB) | task CPU s | JIT s |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for size, res, ratio, same in rows:
        for e, r in res.items():  # in the order they ran
            print(
                "| %s | %s | %.1f | %s | %.1f | %.1f | %.0f k | %.0f | %s | %s | %s | %s |"
                % (
                    size,
                    e,
                    r["job_s"],
                    "%.1f" % r["start_s"] if "start_s" in r else "",
                    r["wall"],
                    r["cpu"],
                    res["spark"]["read"] / r["job_s"] / 1000,
                    r["peak"] / 2**20,
                    r.get("jobs", ""),
                    "%d (%.0f)" % (r["shuffles"], r["shuffled_mib"]) if "shuffles" in r else "",
                    "%.1f" % r["task_cpu_s"] if "task_cpu_s" in r else "",
                    "%.1f" % r["jit_s"] if "jit_s" in r else "",
                )
            )
        print(
            "| %s | Spark/DuckDB | %.1fx | | | | | %s | | | | |"
            % (size, ratio, "same results" if same else "RESULTS DIFFER")
        )
        if "spark-floor" in res:
            print(
                "| %s | Spark's floor (`clean` only)/DuckDB's whole job | %.1fx | | | | | | | | | |"
                % (size, res["spark-floor"]["job_s"] / res["duckdb"]["job_s"])
            )


if __name__ == "__main__":
    sys.exit(main())

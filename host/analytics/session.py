"""The SparkSession the job runs in: local[2] by default, any master on request, quiet logs,
UTC, the SQL semantics the metric definitions are written for, and the settings that depend on
the cluster in hand (tune(): read splits and shuffle partitions from its cores and the input size)."""

import math
import os
import shlex
import time

DEFAULT_MASTER = "local[2]"
HERE = os.path.dirname(os.path.abspath(__file__))
LOG4J2 = os.path.join(HERE, "log4j2.properties")  # errors only; shipped with the package

# Runtime SQL settings the job's definitions rely on; applied to any session it is given.
JOB_SQL_CONF = {
    "spark.sql.session.timeZone": "UTC",  # dates and hours of ts are UTC
    "spark.sql.ansi.enabled": "false",  # empty groups give null, not an error
    # a file that vanishes between listing and reading fails the read, and the job leaves it out
    # and says so (job.read_records); never skipped without a word
    "spark.sql.files.ignoreMissingFiles": "false",
}


# Runtime settings for speed (results do not depend on them); applied to any session too.
JOB_PERF_CONF = {
    # the deduplicated records are cached hash-partitioned by device_id, and the windows, boots,
    # device-hours and device_health group and join within those partitions: keep the cached
    # plan's partitioning visible to the planner (else each of them shuffles the records again)
    "spark.sql.optimizer.canChangeCachedPlanOutputPartitioning": "false",
    # joining two aggregates of the same (device_id, window_ms) groups, both partitioned by
    # device_id alone, needs no shuffle; the default (true) re-shuffled both by both keys
    "spark.sql.requireAllClusterKeysForCoPartition": "false",
    # the window aggregate (collect_list for the latency percentiles) stays a hash aggregate
    # instead of falling back to sorting every record after 128 windows
    "spark.sql.objectHashAggregate.sortBased.fallbackThreshold": "1000000",
    # `clean` and `device_window` are written partitioned by date and hour: one open writer per
    # partition in each task instead of sorting every record by them first
    "spark.sql.optimizer.plannedWrite.enabled": "false",
    "spark.sql.maxConcurrentOutputFileWriters": "64",
    # the job's one big shuffle has its partition count set (tune()); everything after it is small,
    # where adaptive execution split each table's query into a job per shuffle (23 jobs where 9 do)
    # and re-planned between them, and hid an uncached plan's partitioning behind the cache
    "spark.sql.adaptive.enabled": "false",
    # the joins are of aggregates already partitioned alike, or of small per-release tables: joined
    # where they are, not collected to the driver and broadcast (a job each): 9 -> 6 jobs; at 10M
    # records the phases after deduplication took 65 s instead of 71 s, tables identical
    "spark.sql.autoBroadcastJoinThreshold": "-1",
    "spark.sql.join.preferSortMergeJoin": "false",
    # the incremental run reads its state from a directory per day (a month: 31 and more): listed
    # by the driver, not by a Spark job (the default starts one above 32 paths)
    "spark.sql.sources.parallelPartitionDiscovery.threshold": "4096",
}

# What one input record costs on disk, by format: the input's size -> records (partition sizing).
BYTES_PER_RECORD = {"parquet": 30, "ndjson": 330}
SPLIT_BYTES = 2**20  # per core: below it an input is small (one task), four splits a core from four times it
RECORDS_PER_TASK = 1_250_000  # deduplicated in one task's hash map: ~0.5 GB of a 4 GB driver at 8 tasks


def under_spark_submit():
    """True when this Python was started by spark-submit (which chose the master)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def is_local(master):
    return (master or "").startswith("local")


# The driver JVM on local[N], where the driver runs every task and the JVM's own threads take
# their cores from the tasks (bench/spark_report.py's Spark child, runs alternately):
# - the throughput collector: G1's concurrent work and write barriers competed with the tasks
#   (10M records, 3 runs each: median 138.5 -> 121.6 s; every run faster). Pauses don't matter to
#   a batch job.
# - the optimising (C2) compiler only for methods four times as hot as by default: a batch job's
#   lukewarm code (planning, code generation, serialisation) stays with the quick C1 compiler.
#   The JIT's CPU at 10M 41 -> 29 s, the job 95.2, 95.2 -> 89.1, 87.7 s; at 1M 34 -> 32 s.
# On a cluster the driver only plans and collects results, and the executors do the work: driver
# and executors keep the JVM's defaults there.
LOCAL_DRIVER = (
    "-XX:+UseParallelGC -XX:Tier4InvocationThreshold=20000 -XX:Tier4CompileThreshold=60000 "
    "-XX:Tier4BackEdgeThreshold=160000"
)
LOG_OPTION = "-Dlog4j2.configurationFile=file:" + LOG4J2


def driver_java_options(local):
    """The driver JVM's options for a session of a local master (local) or a cluster's."""
    return (LOCAL_DRIVER + " " if local else "") + LOG_OPTION


def _quiet_jvm(local):
    """Before the driver JVM starts (plain python, not spark-submit): bind a local session to
    loopback only, keep Spark's start-up warnings off the console (errors still show) and, on a
    local master, choose the driver's collector and compiler thresholds."""
    if under_spark_submit():
        return
    if local:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    if "PYSPARK_SUBMIT_ARGS" not in os.environ:
        os.environ["PYSPARK_SUBMIT_ARGS"] = "--driver-java-options %s pyspark-shell" % shlex.quote(
            driver_java_options(local)
        )


def build(master=None, app="fleetwire-report", shuffle_partitions=None, extra=None):
    """A SparkSession. master=None: local[2], unless spark-submit already chose one. Settings that
    must be fixed before the JVM starts are chosen here by the kind of master; those that depend on
    the cluster's size are set by tune() once it is up."""
    from pyspark.sql import SparkSession

    if not master and not under_spark_submit():
        master = DEFAULT_MASTER
    local = is_local(master)
    _quiet_jvm(local)
    b = SparkSession.builder.appName(app)
    if master:
        b = b.master(master)
    conf = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.memory": "4g",
    }
    if shuffle_partitions:
        conf["spark.sql.shuffle.partitions"] = str(shuffle_partitions)
    if local:  # nothing but loopback
        conf.update({"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"})
        # on one machine the shuffle and the cache are CPU-bound, not disk- or network-bound:
        # compressing the records' one shuffle and the cached intermediates cost about a tenth
        # of the job's time and CPU at 10M records (bench/spark_report.py --spark-conf) and saved
        # nothing. Between machines the shuffle crosses the network: Spark's default (lz4) stays.
        conf["spark.shuffle.compress"] = "false"
        conf["spark.shuffle.spill.compress"] = "false"
    conf.update(JOB_SQL_CONF)
    conf.update(JOB_PERF_CONF)
    conf.update(extra or {})
    for k, v in conf.items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def prepare(spark):
    """Apply the job's runtime SQL settings to a session it may not have built."""
    for k, v in JOB_SQL_CONF.items():
        spark.conf.set(k, v)
    for k, v in JOB_PERF_CONF.items():
        try:
            spark.conf.set(k, v)
        except Exception:  # noqa: BLE001 - a setting this Spark does not know: run without it
            pass
    return spark


def executors(spark, wait_s=30.0, settle_s=2.0):
    """(executors, cores) of the cluster. On a cluster, executors register after the session
    starts: wait for the first (up to wait_s), then until their number has not changed for settle_s."""
    sc = spark.sparkContext
    if is_local(sc.master):
        return 1, sc.defaultParallelism
    status = sc._jsc.sc().getExecutorMemoryStatus  # block managers: the driver's and one per executor
    t0 = time.time()
    n, since = status().size() - 1, time.time()
    while time.time() - t0 < wait_s:
        time.sleep(0.2)
        m = status().size() - 1
        if m != n:
            n, since = m, time.time()
        elif n > 0 and time.time() - since >= settle_s:
            break
    return n, sc.defaultParallelism  # total executor cores (spark.default.parallelism if set)


def tune(spark, input_bytes=0, fmt="parquet", partitions=None):
    """Settings for this cluster and input, on any master: returns the cores, the number of
    partitions the records are shuffled into, and whether the input is small (one task for it).
    Partitions: at least two tasks per core, and at most RECORDS_PER_TASK records each. Read
    splits: at least four per core when the input is more than a few MB, so that every core reads
    (a 300 MB landing zone is otherwise 3 splits, and on a cluster as many as the 2 cores Spark
    assumes before executors register); one per core for less (an hour's records, the incremental
    run's state: a task per small file costs more than it reads). A partition count the
    user set (--conf spark.sql.shuffle.partitions, or `partitions`) wins, as does a split count
    (spark.sql.files.minPartitionNum)."""
    n_exec, cores = executors(spark)
    conf = spark.sparkContext.getConf()
    if not partitions and conf.contains("spark.sql.shuffle.partitions"):
        partitions = int(conf.get("spark.sql.shuffle.partitions"))
    if not partitions:
        records = input_bytes / BYTES_PER_RECORD.get(fmt, 100)
        partitions = max(2 * cores, math.ceil(records / RECORDS_PER_TASK / cores) * cores)
    spark.conf.set("spark.sql.shuffle.partitions", str(partitions))
    if not conf.contains("spark.sql.files.minPartitionNum"):
        splits = 4 * cores if input_bytes >= 4 * cores * SPLIT_BYTES else cores
        spark.conf.set("spark.sql.files.minPartitionNum", str(splits))
    # the cached records: uncompressed on one machine (CPU is what is short), compressed in a
    # cluster's executors (memory is, and the cache is what spills)
    if not conf.contains("spark.sql.inMemoryColumnarStorage.compressed"):
        spark.conf.set(
            "spark.sql.inMemoryColumnarStorage.compressed",
            "false" if is_local(spark.sparkContext.master) else "true",
        )
    # small: one task does it faster than a shuffle spreads it (an hour's records, its days' state)
    small = input_bytes < SPLIT_BYTES * cores
    return {"executors": n_exec, "cores": cores, "partitions": partitions, "small": small}

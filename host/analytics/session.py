"""The SparkSession the job runs in: local[2] by default, any master on request, quiet logs,
UTC, and the SQL semantics the metric definitions are written for."""

import os

DEFAULT_MASTER = "local[2]"

# Runtime SQL settings the job's definitions rely on; applied to any session it is given.
JOB_SQL_CONF = {
    "spark.sql.session.timeZone": "UTC",  # dates and hours of ts are UTC
    "spark.sql.ansi.enabled": "false",  # empty groups give null, not an error
}


# Runtime settings for speed (results do not depend on them); applied to any session too.
JOB_PERF_CONF = {
    # the deduplicated records are cached hash-partitioned by device_id, and the windows, boots,
    # device-hours and device_health group and join within those partitions: keep the cached
    # plan's partitioning visible to the planner (else each of them shuffles the records again)
    "spark.sql.optimizer.canChangeCachedPlanOutputPartitioning": "false",
    # the window aggregate (collect_list for the latency percentiles) stays a hash aggregate
    # instead of falling back to sorting every record after 128 windows
    "spark.sql.objectHashAggregate.sortBased.fallbackThreshold": "1000000",
    # the `clean` table is written partitioned by date: one open writer per date in each task
    # instead of sorting every record by date first
    "spark.sql.optimizer.plannedWrite.enabled": "false",
    "spark.sql.maxConcurrentOutputFileWriters": "64",
}


def under_spark_submit():
    """True when this Python was started by spark-submit (which chose the master)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


LOG4J2 = """rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n%ex{3}
"""


def _quiet_local_jvm(local):
    """Before the driver JVM starts (plain python, not spark-submit): bind a local session to
    loopback only and keep Spark's start-up warnings off the console (errors still show)."""
    if under_spark_submit():
        return
    if local:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    if "PYSPARK_SUBMIT_ARGS" not in os.environ:
        import tempfile

        path = os.path.join(tempfile.gettempdir(), "fleetwire-log4j2-%d.properties" % os.getuid())
        with open(path, "w") as f:
            f.write(LOG4J2)
        os.environ["PYSPARK_SUBMIT_ARGS"] = (
            "--driver-java-options -Dlog4j2.configurationFile=file:%s pyspark-shell" % path
        )


def _cores(master):
    import re

    m = re.match(r"^local\[(\d+|\*)", master or "")
    if m and m.group(1) != "*":
        return int(m.group(1))
    return os.cpu_count() or 2


def build(master=None, app="fleetwire-report", shuffle_partitions=None, extra=None):
    """A SparkSession. master=None: local[2], unless spark-submit already chose one."""
    from pyspark.sql import SparkSession

    if not master and not under_spark_submit():
        master = DEFAULT_MASTER
    local = bool(master) and master.startswith("local")
    _quiet_local_jvm(local)
    b = SparkSession.builder.appName(app)
    if master:
        b = b.master(master)
    conf = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": str(shuffle_partitions or 8),
        "spark.driver.memory": "4g",
    }
    if local:  # nothing but loopback
        conf.update({"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"})
    conf.update(JOB_SQL_CONF)
    conf.update(JOB_PERF_CONF)
    if local:  # read splits: at least 4 per core, so that the cores finish the scan together
        # (a 300 MB landing zone is otherwise 3 splits on 2 cores)
        conf["spark.sql.files.minPartitionNum"] = str(4 * _cores(master))
        # on one machine the shuffle and the cache are CPU-bound, not disk- or network-bound:
        # compressing the records' one shuffle and the cached intermediates cost about a tenth
        # of the job's time and CPU at 10M records (bench/spark_report.py --spark-conf) and saved nothing
        conf["spark.shuffle.compress"] = "false"
        conf["spark.shuffle.spill.compress"] = "false"
        conf["spark.sql.inMemoryColumnarStorage.compressed"] = "false"
    conf.update(extra or {})
    for k, v in conf.items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def prepare(spark):
    """Apply the job's runtime SQL settings to a session it did not build."""
    for k, v in JOB_SQL_CONF.items():
        spark.conf.set(k, v)
    for k, v in JOB_PERF_CONF.items():
        try:
            spark.conf.set(k, v)
        except Exception:  # noqa: BLE001 - a setting this Spark does not know: run without it
            pass
    return spark

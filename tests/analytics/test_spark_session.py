"""The SparkSession a report runs in."""

import os
import subprocess
import sys


def test_a_local_driver_collects_garbage_with_the_throughput_collector(spark):
    # on local[N] the driver JVM runs every task: G1's concurrent work took cores from them
    beans = spark._jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()
    assert sorted(b.getName() for b in beans) == ["PS MarkSweep", "PS Scavenge"]


def test_a_local_driver_keeps_the_optimising_compiler_for_its_hottest_code(spark):
    # the JIT compiler's threads take their cores from the tasks too: C2 only for methods four
    # times as hot as the JVM's default thresholds
    jvm = spark._jvm
    bean = jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean")
    hs = jvm.java.lang.management.ManagementFactory.getPlatformMXBean(bean)
    got = {k: hs.getVMOption(k).getValue() for k in ("Tier4InvocationThreshold", "Tier4CompileThreshold")}
    assert got == {"Tier4InvocationThreshold": "20000", "Tier4CompileThreshold": "60000"}


def test_a_cluster_driver_keeps_the_jvm_defaults(spark_cluster):
    # on a cluster the executors do the work and the driver only plans and collects: no reason to
    # trade G1's short pauses for throughput there, or to hold back its compiler
    code = (
        "from fleetwire.host.analytics import session\n"
        # executors of two cores, which no worker has: the driver's JVM alone starts
        "s = session.build(%r, app='jvm-defaults-check', extra={'spark.executor.cores': '2'})\n"
        "jvm = s._jvm\n"
        "beans = jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()\n"
        "print(sorted(b.getName() for b in beans))\n"
        "hs = jvm.java.lang.management.ManagementFactory.getPlatformMXBean(\n"
        "    jvm.java.lang.Class.forName('com.sun.management.HotSpotDiagnosticMXBean'))\n"
        "print(hs.getVMOption('Tier4InvocationThreshold').getValue())\n"
        "s.stop()\n" % spark_cluster
    )
    env = {k: v for k, v in os.environ.items() if k != "PYSPARK_SUBMIT_ARGS"}
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-2:] == ["['G1 Old Generation', 'G1 Young Generation']", "5000"]

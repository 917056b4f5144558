"""The SparkSession a local report runs in."""


def test_a_local_driver_collects_garbage_with_the_throughput_collector(spark):
    # on local[N] the driver JVM runs every task: G1's concurrent work took cores from them
    beans = spark._jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()
    assert sorted(b.getName() for b in beans) == ["PS MarkSweep", "PS Scavenge"]

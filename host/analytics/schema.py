"""The telemetry record as devices publish it and the collector lands it, and the
constants that the metric definitions share (kept here so the Spark job, the report and
any independent re-implementation read the same numbers)."""

# (field, type) in the order the generator writes them. "long" is a JSON integer,
# "double" any JSON number, "string" a JSON string.
FIELDS = [
    ("device_id", "string"),
    ("fw_version", "string"),
    ("boot_id", "long"),
    ("ts", "long"),  # epoch ms, device clock
    ("seq", "long"),  # lifetime counter, never resets
    ("uptime_s", "long"),
    ("heap_free", "long"),
    ("heap_min", "long"),
    ("rssi", "long"),
    ("vbat_mv", "long"),  # null on mains-powered boards
    ("reconnects", "long"),  # lifetime counter
    ("publish_fail", "long"),  # lifetime counter
    ("queue_drops", "long"),  # lifetime counter
    ("queue_depth", "long"),
    ("store_used", "long"),
    ("publish_latency_ms", "double"),
    ("reset_cause", "string"),  # only on the first record after a boot
    ("period_s", "long"),  # the device's reporting period
    ("rx_ts", "long"),  # epoch ms, added by the collector
]
FIELD_NAMES = [f for f, _ in FIELDS]

# A record without one of these cannot be placed (device, order, time, release, expected rate).
REQUIRED = ["device_id", "seq", "ts", "boot_id", "fw_version", "period_s"]

# Reset causes. Anything other than these two (panic, watchdog, brownout, unknown) is unexpected.
EXPECTED_RESETS = ("power_on", "deliberate")
RESET_CAUSES = ("power_on", "deliberate", "panic", "watchdog", "brownout")

WINDOW_S = 300  # device_window: 5-minute tumbling windows (by ts)
SILENT_AFTER_S = 30 * 60  # silent: no record this long before the newest record in the data
OUTLIER_Z = 3.5  # modified z-score (median absolute deviation) above which a device is flagged
MIN_COHORT = 5  # fewer devices on a release than this: no outlier scoring
OUTLIER_METRICS = ["loss_rate", "reconnects_per_hour", "heap_leak_bytes_per_hour", "vbat_drop_per_hour"]

# The output tables, in the order the job writes them.
TABLES = ["clean", "device_window", "device_health", "firmware_cohort", "outliers"]

CORRUPT = "_corrupt_record"


def spark_schema(with_corrupt=True):
    """The read schema as a pyspark StructType (imports pyspark lazily)."""
    from pyspark.sql import types as T

    kinds = {"string": T.StringType(), "long": T.LongType(), "double": T.DoubleType()}
    fields = [T.StructField(n, kinds[k], True) for n, k in FIELDS]
    if with_corrupt:
        fields.append(T.StructField(CORRUPT, T.StringType(), True))
    return T.StructType(fields)

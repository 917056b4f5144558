"""The telemetry record as the fleet analytics read it (its fields are
fleetwire.host.fleet.record's, re-exported here), and the constants that the metric
definitions share (kept here so the Spark job, the report and any independent
re-implementation read the same numbers)."""

from fleetwire.host.fleet.record import FIELD_NAMES, FIELDS, REQUIRED  # noqa: F401

# Reset causes. Anything other than these two (panic, watchdog, brownout, unknown) is unexpected.
EXPECTED_RESETS = ("power_on", "deliberate")
RESET_CAUSES = ("power_on", "deliberate", "panic", "watchdog", "brownout")

WINDOW_S = 300  # device_window: 5-minute tumbling windows (by ts)
SILENT_AFTER_S = 30 * 60  # silent: no record this long before the newest record in the data
OUTLIER_Z = 3.5  # modified z-score (median absolute deviation) above which a device is flagged
MIN_COHORT = 5  # fewer devices on a release than this: no outlier scoring
OUTLIER_METRICS = ["loss_rate", "reconnects_per_hour", "heap_leak_bytes_per_hour", "vbat_drop_per_hour"]

# The output tables, in the order the job writes them.
TABLES = [
    "clean",
    "device_window",
    "device_health",
    "firmware_cohort",
    "outliers",
    "crashes",  # these three from LANDING/_crashes/ (crashes.py)
    "crash_signatures",
    "crash_releases",
    "commands",  # these two from LANDING/_commands/ (commands.py)
    "convergence",
]

CORRUPT = "_corrupt_record"


def spark_schema(with_corrupt=True):
    """The read schema as a pyspark StructType (imports pyspark lazily)."""
    from pyspark.sql import types as T

    kinds = {"string": T.StringType(), "long": T.LongType(), "double": T.DoubleType()}
    fields = [T.StructField(n, kinds[k], True) for n, k in FIELDS]
    if with_corrupt:
        fields.append(T.StructField(CORRUPT, T.StringType(), True))
    return T.StructType(fields)

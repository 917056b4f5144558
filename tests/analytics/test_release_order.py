"""The report orders releases as a board does: a release's delta columns (prev_fw_version, the
crash-free change) compare it with the one before it in that order."""

import functools

from fleetwire.ota.trust import older
from fleetwire.host.analytics.metrics import version_key

VERSIONS = [
    "2.0.0",
    "2.0.0-rc10",
    "2.0.0-rc9",
    "2.0.0-rc1",
    "2.0.0-beta.11",
    "2.0.0-beta.2",
    "2.0.0-1",
    "1.10.0",
    "1.9.2",
    "1.9.2+build.7",
    "dev.1",
]


def test_releases_are_ordered_as_the_board_orders_them(spark):
    df = spark.createDataFrame([(v,) for v in VERSIONS], "fw_version string")
    got = [r.fw_version for r in df.orderBy(version_key(), "fw_version").collect()]
    board = sorted(
        VERSIONS, key=functools.cmp_to_key(lambda a, b: -1 if older(a, b) else (1 if older(b, a) else 0))
    )
    assert got == board
    # what it means: numbers by value, a pre-release before its release, rc9 before rc10
    assert got.index("1.9.2") < got.index("1.10.0") < got.index("2.0.0-rc1") < got.index("2.0.0")
    assert got.index("2.0.0-rc9") < got.index("2.0.0-rc10") and got.index("2.0.0-beta.2") < got.index(
        "2.0.0-beta.11"
    )


def test_the_reports_plots_and_crash_table_list_releases_in_the_same_order(spark):
    from fleetwire.host.analytics.report import _version_sort

    df = spark.createDataFrame([(v,) for v in VERSIONS], "fw_version string")
    assert _version_sort(VERSIONS) == [
        r.fw_version for r in df.orderBy(version_key(), "fw_version").collect()
    ]

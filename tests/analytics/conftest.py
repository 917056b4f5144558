"""Fixtures for the Spark analytics tests: one local SparkSession for the whole session."""

import pytest


@pytest.fixture(scope="session")
def spark():
    """local[2], two shuffle partitions, no UI; stopped at the end of the session."""
    from fleetwire.host.analytics import session

    s = session.build(
        "local[2]",
        app="fleetwire-tests",
        shuffle_partitions=2,
        extra={"spark.driver.memory": "2g", "spark.default.parallelism": "2"},
    )
    yield s
    s.stop()


@pytest.fixture
def run_job(spark):
    """run_job(input, out, **config) -> (job.Result, logged lines)."""
    from fleetwire.host.analytics import job

    def run(input, out, **kw):
        lines = []
        kw.setdefault("report", False)
        res = job.run(spark, job.Config(input=str(input), out=str(out), log=lines.append, **kw))
        return res, lines

    return run


def table(out, name):
    import pandas as pd

    return pd.read_parquet(str(out) + "/" + name)

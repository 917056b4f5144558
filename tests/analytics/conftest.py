"""Fixtures for the Spark analytics tests: one local SparkSession for the whole session, and a real
Spark standalone cluster (a master and two workers on loopback) for the tests that need one."""

import os
import subprocess
import sys

import pytest

FW = [sys.executable, "-m", "fleetwire.tools.cli"]


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


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory):
    """A Spark standalone cluster from pyspark's own spark-class: a master and two workers (one core
    each) on 127.0.0.1, each worker with its own work directory. Yields the master's URL."""
    from fleetwire.host.analytics.standalone import Cluster

    with Cluster(tmp_path_factory.mktemp("spark-cluster"), workers=2, cores=1, memory="1g") as c:
        yield c.url


@pytest.fixture(scope="session")
def report_cli(java):
    """report_cli(*args, cwd=None, timeout=600): `fleetwire report ARGS` as a user runs it (the
    driver on loopback) -> CompletedProcess."""

    def run(*args, cwd=None, timeout=600):
        env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1")
        return subprocess.run(
            FW + ["report"] + [str(a) for a in args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            cwd=cwd,
        )

    return run


@pytest.fixture(scope="session")
def report_dir(tmp_path_factory, java):
    """`fleetwire gen-telemetry` (15 devices, 3 hours) and `fleetwire report` on it, as a user runs
    them -> (the output directory, the report's CompletedProcess). Once a session: the CLI's tests
    and report.html's in a browser read the same run."""
    import re

    base = tmp_path_factory.mktemp("cli")
    g = subprocess.run(
        FW + ["gen-telemetry", "--devices", "15", "--hours", "3", "--out", str(base / "landing")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert g.returncode == 0, g.stderr
    assert re.match(r"wrote \d+ records \(15 devices, 3 hours\) in \d+ files under ", g.stdout)
    r = subprocess.run(
        FW + ["report", "--input", str(base / "landing"), "--out", str(base / "out")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    return base / "out", r


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

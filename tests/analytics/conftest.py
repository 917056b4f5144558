"""Fixtures for the Spark analytics tests: one local SparkSession for the whole session, and a real
Spark standalone cluster (a master and two workers on loopback) for the tests that need one."""

import os
import subprocess
import sys

import pytest

from support import ROOT

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


# The documentation's report example (docs/guides/analytics.md, the README): `fleetwire
# gen-telemetry` and `fleetwire report`, run as written in a directory of its own.
REPORT_EXAMPLE = os.path.join(ROOT, "docs", "snippets", "shell/report.sh")


@pytest.fixture(scope="session")
def report_dir(tmp_path_factory, java):
    """The documentation's report example as a user runs it -> (the output directory, the
    CompletedProcess). Once a session: the CLI's tests, the tables page's columns and report.html
    in a browser read the same run."""
    import re

    base = tmp_path_factory.mktemp("cli")
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
    r = subprocess.run(
        ["bash", "-e", REPORT_EXAMPLE], cwd=str(base), env=env, capture_output=True, text=True, timeout=600
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert re.search(r"^wrote \d+ records \(20 devices, 2 hours\) in \d+ files under ", r.stdout, re.M)
    return base / "report", r


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

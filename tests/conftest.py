"""Fixtures shared by the whole suite, and its tiers: each test is marked by what it needs,
read from the fixtures it uses (NEEDS), so nobody has to remember a marker. The fast tier
(`bash tools/run.sh test --fast`) is every test that needs no broker, no Spark and no board:
the codec on both interpreters, the session, the stores, the CLI, the layout, the portable
cases."""

import os
import subprocess
import sys

import pytest

from fleetwire.host.rig import build, micropython

pytest_plugins = ["fleetwire.host.testing.pytest_plugin", "fleetwire.host.testing.hil"]

from support import ROOT  # noqa: F401,E402

# Spark as the suite runs it (tests/spark-conf/spark-defaults.conf says why): every JVM a test
# starts, in this process or a child, the standalone cluster's executors included.
os.environ.setdefault("SPARK_CONF_DIR", os.path.join(ROOT, "tests", "spark-conf"))
os.environ.setdefault("SPARK_SUBMIT_OPTS", "-XX:TieredStopAtLevel=1")


@pytest.fixture(scope="session")
def board_lib(tmp_path_factory):
    """The board tree as a board runs it (.mpy, built by `fleetwire build --mpy`): the
    directory to put on MICROPYPATH."""
    out = tmp_path_factory.mktemp("board-mpy")
    build.build(str(out), mpy=True)
    return os.path.join(str(out), "lib")


@pytest.fixture(scope="session")
def board_lib_py(tmp_path_factory):
    """The board tree as .py sources."""
    out = tmp_path_factory.mktemp("board-py")
    build.build(str(out))
    return os.path.join(str(out), "lib")


class MicroPythonRunner:
    """Runs scripts on the MicroPython unix port with the board tree importable."""

    def __init__(self, lib):
        self.lib = lib

    def run(self, args, heap="96K", timeout=120, check=True, **kw):
        r = micropython.run(args, lib=self.lib, heap=heap, timeout=timeout, **kw)
        if check and r.returncode:
            raise AssertionError(
                "micropython %s exited %d\nstdout:\n%s\nstderr:\n%s"
                % (" ".join(map(str, args)), r.returncode, r.stdout, r.stderr)
            )
        return r

    def exec(self, code, heap="96K", **kw):
        return self.run(["-c", code], heap=heap, **kw)


@pytest.fixture(scope="session")
def mpy(board_lib):
    """Run code on real MicroPython (unix port) against the .mpy board tree."""
    return MicroPythonRunner(board_lib)


def run_cpython(args, **kw):
    return subprocess.run([sys.executable] + list(args), capture_output=True, text=True, **kw)


# marker -> the fixtures that mean a test needs it (those of the plugins, of tests/*/conftest.py
# and of single test modules alike)
NEEDS = {
    "broker": {
        "mosquitto",
        "mosquitto_tls",
        "fresh_mosquitto",
        "identity_mosquitto",
        "broker",
        "broker_pool",
        "make_observer",
        "observer",
        "make_proxy",
        "hil_broker",
        "matrix_broker",
    },
    "spark": {"spark", "spark_cluster", "run_job", "report_cli", "java"},
    "board": {"hil_board", "ota_hil_board", "ota_board", "vboard", "board"},
    "micropython": {"mpy", "board_lib", "board_lib_py", "device"},
}


# How the whole suite spreads over its workers (pytest-xdist, --dist loadgroup, from
# tools/run.sh). The longest work goes out first, so that no worker is left with it at the end
# (the suite's wall time is its longest worker's); seconds each took alone on 2 cores,
# `pytest --durations=0`. The order changes nothing but when a test runs.
LONGEST_FIRST = (
    "tests/analytics/test_cluster.py",  # ~190 s: a standalone cluster's master, workers, executors
    "tests/analytics/test_incremental.py",  # ~500 s, a group of its own (group() below)
    "tests/fleet/test_demo.py",  # ~150 s: the whole pipeline
    "tests/test_wheel.py",
    "tests/analytics/",
    "tests/portable/test_portable.py::test_cpython[store-",  # the power-cut sweeps, CPU-bound
    "tests/ota/",
    "tests/resilience/test_cut_sweep.py",
    "tests/hil/",
    "tests/rig/",
    "tests/fleet/",
    "tests/device/test_brokers.py",
)


def rank(nodeid):
    for i, prefix in enumerate(LONGEST_FIRST):
        if nodeid.startswith(prefix):
            return i
    return len(LONGEST_FIRST)


def pytest_collection_finish(session):
    # What collection imported (the suite's modules, hypothesis, pandas, pyspark) stays for the
    # whole run: out of the collector's sight, a full collection no longer walks it. A test that
    # allocates much in this process (the stores' power-cut sweeps) spent most of its time there.
    import gc

    gc.collect()
    gc.freeze()


@pytest.hookimpl(tryfirst=True)  # before xdist's, which reads the groups set here
def pytest_collection_modifyitems(config, items):
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        for marker, fixtures in NEEDS.items():
            if names & fixtures:
                item.add_marker(marker)
        params = getattr(getattr(item, "callspec", None), "params", {})
        if params.get("interp") == "micropython":
            item.add_marker("micropython")
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    group(items, getattr(config.option, "loadgroup", False) and worker)
    if worker:  # stable: each group keeps its order (one process keeps the collection's)
        items.sort(key=lambda item: rank(item.nodeid))


def group(items, worker):
    """xdist groups (--dist loadgroup): the tests of a group run on one worker, in order.
    - Spark: a JVM takes a core for as long as it runs, and with one on every worker both
      cores thrashed (15 tests in 15 minutes). Every test that starts Spark (a SparkSession, a
      standalone cluster, `fleetwire report` or the demo) is in one of two groups, so two
      JVMs run at most while the other workers take the rest: test_incremental.py (the
      longest module) in one, the others in the other.
    - test_wheel.py builds the wheel in the checkout's build/ folder: one worker at a time.
    In a worker the group is also written into the test's id, which is what xdist's scheduler
    reads: xdist 3.8's own hook writes it to an attribute pytest 9 no longer reads (`_nodeid`),
    so its groups did nothing (the Spark tests were spread over every worker)."""
    for item in items:
        module = item.module.__name__
        name = None
        if module == "test_wheel":
            name = "wheel"
        elif item.get_closest_marker("spark"):
            name = "spark-incremental" if module == "test_incremental" else "spark"
        if name:
            item.add_marker(pytest.mark.xdist_group(name))
            if worker and "@" not in item.nodeid:
                from _pytest.nodes import coerce_node_id

                item._id = coerce_node_id(item.nodeid + "@" + name)


@pytest.fixture(scope="session")
def java():
    """The Java that Spark runs on (a test that starts Spark in a process of its own takes this,
    which marks it `spark`)."""
    import shutil

    path = shutil.which("java")
    assert path, "Spark needs Java 17 or later: bash tools/run.sh setup installs it"
    return path

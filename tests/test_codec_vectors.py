"""The codec answers every vector in host/portable/vectors/codec.jsonl the same way on CPython
and on MicroPython (unix port, the .mpy board tree, a device-sized heap).

The vectors are the specification: bytes computed from the MQTT 3.1.1 standard and
the statement id each malformed input must be rejected with. host/portable/vectors/README.md
describes the format; host/portable/vectors/run_vectors.py checks one vector on either
interpreter, and this file runs it on both and reports every vector by name."""

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from fleetwire.host.portable.vectors import RUNNER, VECTOR_FILE, parse_results, summary_line

SMALL_HEAP = "64K"  # what a small board leaves a program
BIG_HEAP = "1M"  # vectors marked "big" hold 64 KB strings (as `fleetwire selfcheck`)


def load_vectors(path=VECTOR_FILE):
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                out.append(json.loads(line))
    return out


VECTORS = load_vectors()
NAMES = [v["name"] for v in VECTORS]
KINDS = (
    "packet",
    "decode_error",
    "encode_error",
    "stream",
    "topic_name",
    "topic_filter",
    "topic_match",
    "utf8",
)


def _load_runner():
    spec = importlib.util.spec_from_file_location("run_vectors", RUNNER)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


runner = _load_runner()


# ---- the vector file itself


def test_there_are_at_least_150_vectors_with_unique_names():
    assert len(VECTORS) >= 150
    dupes = sorted({n for n in NAMES if NAMES.count(n) > 1})
    assert not dupes, "duplicate vector names: %s" % dupes


def test_every_vector_kind_is_known_and_used():
    used = {v["kind"] for v in VECTORS}
    assert used == set(KINDS)


def test_every_packet_type_has_valid_and_invalid_vectors():
    valid, invalid = set(), set()
    for v in VECTORS:
        if v["kind"] == "packet":
            valid.add(v["packet"]["type"])
        elif v["kind"] == "decode_error":
            first = runner.hexbytes(v["hex"])[0]
            invalid.add(first >> 4)
    assert valid == set(runner.CLASSES)
    assert invalid >= set(range(1, 15))


# ---- CPython: in process, one test per vector


@pytest.mark.parametrize("v", VECTORS, ids=NAMES)
def test_vector_on_cpython(v):
    runner.check(v)


# ---- MicroPython: the runner once per heap size, one test per vector


@pytest.fixture(scope="session")
def mp_vector_run(board_lib, tmp_path_factory):
    """({vector name: None or why it failed}, {set: raw output}, {set: names}) from MicroPython.

    The runner is precompiled like the codec (as `fleetwire selfcheck` does): compiling
    it from source inside a 64 KB heap would fragment the heap the vectors need."""
    from fleetwire.host.rig import build, micropython

    rdir = str(tmp_path_factory.mktemp("vector-runner"))
    subprocess.run(
        [
            build.mpy_cross_command(),
            "-o",
            os.path.join(rdir, "run_vectors.mpy"),
            "-s",
            "run_vectors.py",
            RUNNER,
        ],
        check=True,
        capture_output=True,
    )
    lib = os.pathsep.join([board_lib, rdir])
    results, outs, sets = {}, {}, {}
    for which, heap in (("small", SMALL_HEAP), ("big", BIG_HEAP)):
        r = micropython.run(["-m", "run_vectors", VECTOR_FILE, which], lib=lib, heap=heap, timeout=300)
        outs[which] = r.stdout + r.stderr
        part = parse_results(r.stdout)
        assert not set(part) & set(results), "a vector ran in both sets"
        results.update(part)
        sets[which] = set(part)
    return results, outs, sets


@pytest.mark.micropython
@pytest.mark.parametrize("name", NAMES)
def test_vector_on_micropython(name, mp_vector_run):
    results, outs, _ = mp_vector_run
    assert name in results, "MicroPython did not report %s (%s):\n%s" % (
        name,
        summary_line(outs["small"] + outs["big"]),
        outs["small"][-2000:] + outs["big"][-2000:],
    )
    assert results[name] is None, results[name]


@pytest.mark.micropython
def test_small_vectors_ran_in_the_small_heap_and_big_ones_in_the_big_heap(mp_vector_run):
    sets = mp_vector_run[2]
    assert sets["small"] == {v["name"] for v in VECTORS if not v.get("big")}
    assert sets["big"] == {v["name"] for v in VECTORS if v.get("big")}


@pytest.mark.micropython
def test_both_interpreters_ran_the_same_vectors(mp_vector_run, tmp_path):
    # CPython through the same command line the board uses, so neither side can skip lines.
    r = subprocess.run(
        [sys.executable, RUNNER, VECTOR_FILE, "all"], capture_output=True, text=True, timeout=300
    )
    cpython = parse_results(r.stdout)
    micropython = set(mp_vector_run[0])
    assert set(cpython) == micropython == set(NAMES)
    assert r.returncode == 0, r.stdout[-3000:]

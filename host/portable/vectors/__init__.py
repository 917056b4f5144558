"""The codec's test vectors (codec.jsonl, mqtt5.jsonl) and their runners (run_vectors.py,
run_vectors5.py), which run unchanged on MicroPython and CPython; this module finds them and
reads the runners' output."""

import os

VECTOR_DIR = os.path.dirname(os.path.abspath(__file__))
VECTOR_FILE = os.path.join(VECTOR_DIR, "codec.jsonl")
RUNNER = os.path.join(VECTOR_DIR, "run_vectors.py")
VECTOR_FILE5 = os.path.join(VECTOR_DIR, "mqtt5.jsonl")  # MQTT 5, and its runner
RUNNER5 = os.path.join(VECTOR_DIR, "run_vectors5.py")


def parse_results(out):
    """Runner output -> {vector name: None if passed, else the failure text}."""
    res = {}
    for line in out.splitlines():
        if line.startswith("PASS "):
            res[line[5:]] = None
        elif line.startswith("FAIL "):
            name, _, why = line[5:].partition(": ")
            res[name] = why
    return res


def summary_line(out):
    lines = [l for l in out.splitlines() if l.endswith(" failed") and " passed, " in l]
    if not lines:
        return "no result (runner crashed?)"
    p = sum(int(l.split()[0]) for l in lines)
    f = sum(int(l.split(", ")[1].split()[0]) for l in lines)
    return "%d vectors passed, %d failed" % (p, f)

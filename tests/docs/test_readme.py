"""The README is the front door: short, its figures the benchmarks' own, its paths real."""

import os
import re

from support import ROOT


def read(*path):
    with open(os.path.join(ROOT, *path), encoding="utf-8") as f:
        return f.read()


def test_the_readme_is_at_most_200_lines():
    assert len(read("README.md").splitlines()) <= 200


def heap_row(label):
    """{client: figure} of a row of bench/README.md's heap table (the row after `label`'s)."""
    text = read("bench", "README.md").split("## Heap", 1)[1]
    lines = [line for line in text.splitlines() if line.startswith("| ")]
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    for i, line in enumerate(lines):
        if line.startswith("| " + label):
            cells = [c.strip() for c in lines[i + 1].strip("|").split("|")]
            return dict(zip(head[1:], cells[1:]))
    raise AssertionError("no row %r in bench/README.md's heap table" % label)


def test_the_readmes_heap_figures_are_the_latest_heap_tables():
    readme = read("README.md")
    rows = {
        "heap after connect + subscribe, 32-bit port, `.mpy`": (
            heap_row("32-bit plain port, `.mpy`: import"),
            " B",
        ),
        "the same, frozen into the firmware": (heap_row("32-bit, frozen: import"), " B"),
    }
    smallest = heap_row("the same, after connect + subscribe")  # the row after it: smallest heap
    rows["smallest heap for the bench's scenario, `.mpy`"] = (smallest, " KB")
    for label, (bench, unit) in rows.items():
        line = next(line for line in readme.splitlines() if line.startswith("| " + label + " |"))
        cells = [c.strip() for c in line.strip("|").split("|")][1:]
        want = [bench["fw plain"] + unit, bench["umqtt.simple"] + unit, bench["mqtt_as"] + unit, ""]
        assert cells == want, label


def test_every_path_the_readme_names_exists():
    paths = re.findall(r"`((?:docs|bench|tests|tools|device|host|firmware)/[\w./-]+)`", read("README.md"))
    assert paths and [p for p in paths if not os.path.exists(os.path.join(ROOT, p))] == []

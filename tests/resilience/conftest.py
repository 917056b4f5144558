"""Resilience tests: the device fixtures (tests/agents.py) run each test on
MicroPython (80 KB heap) and on CPython; `cut_report(name, points)` adds a line to
the cut-sweep summary printed at the end of the run."""

import pytest

from agents import interp, device, front, agent_lib  # noqa: F401


@pytest.fixture
def cut_report(request):
    rows = request.config.__dict__.setdefault("_fleetwire_cuts", [])

    def add(points, messages):
        rows.append((request.node.name, points, messages))

    return add


def pytest_terminal_summary(terminalreporter, config):
    rows = getattr(config, "_fleetwire_cuts", None)
    if not rows:
        return
    tr = terminalreporter
    tr.section("cut sweep: each cut point passed with nothing lost and, at QoS 2, nothing duplicated")
    for name, points, messages in rows:
        tr.write_line("%-90s %5d cut points %5d messages" % (name, points, messages))
    tr.write_line("%-90s %5d cut points" % ("total", sum(r[1] for r in rows)))

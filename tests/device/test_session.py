"""The sans-IO session's flows (tests/portable/session_cases.py), on CPython and on
the MicroPython unix port."""

import os

from portable.harness import HERE, make_tests

# The device code plus the test scaffolding (the full codec and these cases
# are loaded too), so more than the 80 KB a device program gets.
HEAP = "128K"

test_cpython, test_micropython = make_tests(
    "session_cases", heap=HEAP, extra=[os.path.join(HERE, "session_kit.py")]
)

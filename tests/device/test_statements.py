"""The MQTT 3.1.1 client statements that no flow in session_cases.py names
(tests/portable/statement_cases.py), on CPython and on the MicroPython unix port."""

import os

from portable.harness import HERE, make_tests

test_cpython, test_micropython = make_tests(
    "statement_cases", heap="96K", extra=[os.path.join(HERE, "session_kit.py")]
)

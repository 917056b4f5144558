"""What both clients share (tests/portable/front_cases.py), on CPython and on the
MicroPython unix port with a device's 80 KB heap."""

from portable.harness import make_tests

test_cpython, test_micropython = make_tests("front_cases")

"""The vitals record's store_used against the real client and store
(tests/portable/vitals_cases.py), on CPython and on the MicroPython unix port."""

from portable.harness import make_tests

# The client, a RAM store, the agent and the test scaffolding (json, the case runner)
# in one heap: more than the 96 KB a device program gets, as for the session cases.
test_cpython, test_micropython = make_tests("vitals_cases", heap="96K")

"""The NOR-flash emulator (host/portable/norflash.py) on CPython and the MicroPython unix port."""

import os
from fleetwire.host.portable import PATH as PORTABLE

from portable.harness import make_tests

test_cpython, test_micropython = make_tests(
    "norflash_cases", heap="96K", extra=[os.path.join(PORTABLE, "norflash.py")]
)

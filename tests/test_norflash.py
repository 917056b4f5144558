"""The NOR-flash emulator (host/norflash.py) on CPython and the MicroPython unix port."""

import os

from portable.harness import make_tests
from support import ROOT

test_cpython, test_micropython = make_tests(
    "norflash_cases", heap="96K", extra=[os.path.join(ROOT, "host", "norflash.py")]
)

"""The flash store (device/ringstore.py) under power cuts, and Paho's restore
semantics, on CPython and on the MicroPython unix port (256K heap: the emulated
flash itself, 2-12 KB, lives in the heap there)."""

import os

from portable.harness import make_tests
from support import ROOT

test_cpython, test_micropython = make_tests(
    "store_cases", heap="256K", extra=[os.path.join(ROOT, "host", f) for f in ("norflash.py", "cutsweep.py")]
)

"""The flash store (device/ringstore.py) under power cuts, and Paho's restore
semantics, on CPython and on the MicroPython unix port (256K heap: the emulated
flash itself, 2-12 KB, lives in the heap there)."""

import os
from fleetwire.host.portable import PATH as PORTABLE

from portable.harness import make_tests

test_cpython, test_micropython = make_tests(
    "store_cases", heap="256K", extra=[os.path.join(PORTABLE, f) for f in ("norflash.py", "cutsweep.py")]
)

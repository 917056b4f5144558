"""The flash store (device/ringstore.py) under power cuts, and Paho's restore
semantics, on CPython and on the MicroPython unix port."""
import os

from portable.harness import make_tests
from support import ROOT

test_cpython, test_micropython = make_tests(
    "store_cases", heap="128K", extra=[os.path.join(ROOT, "host", "norflash.py")])

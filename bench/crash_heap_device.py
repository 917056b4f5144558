# bench/crash_heap.py's device side: what crash capture holds, from .mpy. Prints
# "HEAP <what> <bytes>" (gc.mem_alloc() after a collection, differences), and before each
# measured step "QSTR <when>" then micropython.qstr_info()'s line (the interned names).
import gc
import sys

import micropython


class RTC:
    # an ESP32's RTC memory as the unix port has none: keeps nothing
    def memory(self, b=None):
        return b""


class machine:
    RTC = RTC


sys.modules["machine"] = machine


def mem():
    gc.collect()
    return gc.mem_alloc()


lines, width, size = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
import fleetwire  # noqa: E402,F401 (the package: any program of fleetwire's has it)
from fleetwire.store import once  # noqa: E402 (the runner's, loaded before)

# a fresh pool of interned names with room: else whichever import fills the last one is
# charged the next pool (its size doubles), a figure of the heap's history, not of the code
o = RTC()
for n in range(400):
    setattr(o, "w%d" % n, 0)
o = e = None
print("QSTR start")
micropython.qstr_info()
m0 = mem()
from fleetwire import crash  # noqa: E402

m1 = mem()
print("QSTR import")
micropython.qstr_info()
once("crashsend", "install", crash._w, "1.4.2", 12, lines, width, size)  # as the runner does
m2 = mem()
print("QSTR install")
micropython.qstr_info()
for _ in range(lines * 2):
    crash.log("a log line")
try:
    {}["x"]
except KeyError as e:  # noqa: F811,F841
    micropython.heap_lock()  # a crash allocates nothing
    crash.catch(e)
    micropython.heap_unlock()
e = None
m4 = mem()
print("HEAP import", m1 - m0)
print("HEAP install", m2 - m1)
print("HEAP buffers", size)
print("HEAP resident", m4 - m0)
print("HEAP capture", m4 - m0 - size)
print("HEAP log+catch", m4 - m2)
m5 = mem()
from fleetwire import crashsend  # noqa: E402,F401

print("HEAP crashsend", mem() - m5)

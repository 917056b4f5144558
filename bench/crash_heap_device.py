# bench/crash_heap.py's device side: what crash capture holds, from .mpy. Prints
# "HEAP <what> <bytes>" (gc.mem_alloc() after a collection, differences).
import gc
import sys


def mem():
    gc.collect()
    return gc.mem_alloc()


lines, width, size = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
import fleetwire  # noqa: E402,F401 (the package: any program of fleetwire's has it)

m0 = mem()
from fleetwire import crash  # noqa: E402

m1 = mem()
crash.install("1.4.2", 12, lines, width, size)
m2 = mem()
for _ in range(lines * 2):
    crash.log("a log line")
m3 = mem()
try:
    {}["x"]
except KeyError as e:
    crash.take(e)
m4 = mem()
print("HEAP import", m1 - m0)
print("HEAP install", m2 - m1)
print("HEAP buffers", size)
print("HEAP resident", m4 - m0)
print("HEAP log+take", m4 - m2)
m5 = mem()
from fleetwire import crashsend  # noqa: E402,F401

print("HEAP crashsend", mem() - m5)

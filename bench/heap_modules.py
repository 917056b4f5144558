# bench/heap.py's module census: micropython -m heap_modules modules FILE 0 0
# imports each module named in FILE (one a line) alone, in that order, and prints
# "MOD <name> <bytes> <other modules the import loaded>" (the host puts those first and runs
# it again). A file, not an argument: the unix port interns each argument, 255 bytes at most.
import sys
from heap_device import mode, mem

with open(mode) as f:
    names = f.read().split()
for name in names:
    had = tuple(sys.modules)  # alive across both readings: not counted
    before = mem()
    __import__(name)
    n = mem() - before
    print("MOD", name, n, " ".join(m for m in sys.modules if m != name and m not in had))
    had = None
print("DONE")

# print() feeds the crash record's log ring as well as the console: importing this module
# replaces builtins.print, where a port lets a program override builtins (the ESP32's and the
# unix port's do: MICROPY_CAN_OVERRIDE_BUILTINS). The runner imports it for "crash_print":
# true; a program of its own, after crashrun.install(). A print() with file= is a file's, not
# the console's, and stays out. Each print allocates a little more (its arguments, the line).
import builtins

from . import crash

_print = print


def _p(*a, **k):
    _print(*a, **k)
    if k.get("file") is None:
        crash.log(a[0] if len(a) == 1 and type(a[0]) is str else k.get("sep", " ").join(str(x) for x in a))


crash.print = _print  # the record's own writes: the builtin (never this one, nor its allocations)
builtins.print = _p

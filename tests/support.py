"""Constants the tests share (importable as `support`: tests/ is on sys.path)."""

import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The heap a device program gets on the MicroPython unix port: an ESP32's, roughly.
DEVICE_HEAP = os.environ.get("FLEETWIRE_DEVICE_HEAP", "80K")


def sources(folder):
    """The .py files under ROOT/folder, its family folders (device/ota/, ...) included, as
    paths relative to it, sorted."""
    top = os.path.join(ROOT, folder)
    out = []
    for d, dirs, files in os.walk(top):
        dirs[:] = [x for x in dirs if x != "__pycache__"]
        out += [os.path.relpath(os.path.join(d, f), top) for f in files if f.endswith(".py")]
    return sorted(out)


def device_command(interp, board_lib, script, extra_heap_kb=0):
    """(argv, env) running script as a device program: MicroPython with the board
    tree and DEVICE_HEAP (plus extra_heap_kb for what the unix port keeps in the heap
    and a board does not, such as an emulated flash partition), or CPython unbuffered."""
    import sys
    from fleetwire.host.rig import micropython

    env = dict(os.environ)
    if interp == "micropython":
        env["MICROPYPATH"] = board_lib + os.pathsep + ".frozen"
        heap = DEVICE_HEAP
        if extra_heap_kb:
            heap = "%dK" % (int(heap.rstrip("K")) + extra_heap_kb)
        return [micropython.binary(), "-X", "heapsize=" + heap, script], env
    return [sys.executable, "-u", script], env

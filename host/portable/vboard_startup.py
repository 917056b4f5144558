# The virtual board's start-up program (fleetwire.host.rig.vboard runs it in each
# interpreter it starts): the board's own filesystem at /, boot.py and main.py as a board
# runs them.
import sys
import os

try:
    # The board's filesystem is its fs/ folder, mounted at / as a board's flash is (so
    # "/store" or "/lib" mean the same as on a board, never the host's); the board's
    # own files (flash images, wlan, the emulated modules) are at /.vboard.
    import vfs

    _d = os.getenv("FLEETWIRE_VBOARD")
    try:
        vfs.umount("/")
    except OSError:
        pass
    vfs.mount(vfs.VfsPosix(_d + "/fs"), "/")
    vfs.mount(vfs.VfsPosix(_d), "/.vboard")
    os.chdir("/")
    sys.path[:] = ["/.vboard/emul", "", ".frozen", "/.vboard/app", "/lib"]
    del _d
except ImportError:
    pass  # no vfs module: paths stay the host's, with fs/ as the working directory
print(
    "fleetwire virtual board %s (%s reset, %s)"
    % (
        os.getenv("FLEETWIRE_VBOARD_ID"),
        os.getenv("FLEETWIRE_VBOARD_CAUSE"),
        os.getenv("FLEETWIRE_VBOARD_APP"),
    )
)
# In the raw REPL a soft reset runs boot.py only, as on a board (mpremote relies on it).
for _f in ("boot.py",) if os.getenv("FLEETWIRE_VBOARD_RAW") else ("boot.py", "main.py"):
    try:
        os.stat(_f)
    except OSError:
        continue
    try:
        exec(open(_f).read(), {"__name__": "__main__"})
    except KeyboardInterrupt:
        print("KeyboardInterrupt in", _f)
        break
    except SystemExit:
        raise
    except Exception as _e:
        sys.print_exception(_e)
del _f

# The virtual board's own state, shared by the emulated machine, network and esp32.
import os
import json

# On a virtual board its directory is mounted at /.vboard (the board's own files at /);
# elsewhere FLEETWIRE_VBOARD names it.
DIR = os.getenv("FLEETWIRE_VBOARD") or "."
try:
    os.stat("/.vboard/vboard.json")
    DIR = "/.vboard"
except OSError:
    pass
_info = None


def info():
    global _info
    if _info is None:
        try:
            with open(DIR + "/vboard.json") as f:
                _info = json.load(f)
        except (OSError, ValueError):
            _info = {}
    return _info


def read(name, default=""):
    try:
        with open(DIR + "/" + name) as f:
            return f.read().strip()
    except OSError:
        return default


def write(name, text):
    with open(DIR + "/" + name, "w") as f:
        f.write(text)

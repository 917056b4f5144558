"""What the fleet tests share (tests/fleet is on sys.path when they run)."""

import glob
import json
import os
import time


def landed(landing):
    """Every record in the landing zone's finished files."""
    out = []
    for path in glob.glob(os.path.join(landing, "date=*", "hour=*", "*.ndjson")):
        with open(path) as f:
            out += [json.loads(line) for line in f]
    return out


def until(cond, tries=300):
    """Poll cond (up to `tries` times, 50 ms apart) -> whether it came true."""
    for _ in range(tries):
        if cond():
            return True
        time.sleep(0.05)
    return cond()

"""The simulated fleet's application, as source: what its releases carry, so that their crashes
(fleetwire.host.fleet.device's CRASHES and NEW_CRASH, which name these files and functions)
resolve to lines as a real release's do. `sources(version)` is a release's files; the demo
bundles them and writes each release's symbol map (fleetwire.host.rig.symbols) beside it, as
`fleetwire bundle` does, and the gate and the report read the maps."""

import os

# the bad release's own crash is in average(): it divides by the count of an empty window
_APP = """VERSION = {version!r}
import sensor
import uplink
import batch

window = []


def setup(client):
    sensor.calibrate()


def average(values):
    total = 0
    for v in values:
        total += v
    return total // len(values)


def step(client):
    window.append(sensor.read())
    if len(window) > 10:
        del window[0]
    {step_average}
    uplink.send(client, batch.pack(window, level))
"""

_SENSOR = """import machine

cal = {}


def calibrate():
    cal["calibration"] = 1


def read():
    return machine.ADC(0).read_u16() * cal["calibration"]
"""

_UPLINK = """def send(client, payload):
    client.publish(b"fleet/app/level", payload, qos=1)
"""

_BATCH = """import json


def pack(values, level):
    return json.dumps({"values": values, "level": level})
"""

# the bad release reads the average of a window it has just emptied; the others do not
_BAD_STEP = "level = average([v for v in window if v > 0])"
_GOOD_STEP = "level = average(window) if window else 0"


def sources(version, bad=False):
    """A release's files -> {name: text}."""
    app = _APP.format(
        version=version,
        step_average=_BAD_STEP if bad else _GOOD_STEP,
    )
    return {"app.py": app, "sensor.py": _SENSOR, "uplink.py": _UPLINK, "batch.py": _BATCH}


def write_symbols(directory, version, bad=False):
    """The release's symbol map, <directory>/<version>.symbols.json -> its path."""
    from fleetwire.host.rig import symbols

    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "%s.symbols.json" % version)
    symbols.write(path, [(n, n, t) for n, t in sorted(sources(version, bad).items())], release=version)
    return path

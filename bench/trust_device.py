# The device side of bench/trust.py, on the MicroPython unix port (fleetwire from .mpy):
#   micropython trust_device.py CASES REPEAT
# CASES: a JSON file, [[bits, key set, signed offer], ...]. For each case, what the check of a
# signed offer costs, as the updater runs it (fleetwire.ota.trust loaded for the check and dropped
# after it; fleetwire.ota.ops loads only then): one JSON line
#   RESULT {"bits", "module": bytes held by fleetwire.ota.trust loaded, "held": by it and the offer
#   parsed, "alloc": bytes allocated by one check (no collection meanwhile: the most it can
#   need), "us", "min_us": the median and the least time of a check (REPEAT of them), "ok",
#   "after": bytes still held once the module is dropped}
import gc
import json
import sys
import time

import fleetwire.ota.agent as agent

CASES = json.load(open(sys.argv[1]))
REPEAT = int(sys.argv[2])


def used():
    gc.collect()
    return gc.mem_alloc()


def one(bits, keys, msg):
    # everything the measurement keeps is made before the first count
    r = {"bits": bits, "module": 0, "held": 0, "alloc": 0, "us": 0, "min_us": 0, "ok": None, "after": 0}
    times = [0] * REPEAT
    base = used()
    from fleetwire.ota import trust

    r["module"] = used() - base
    e, m = trust.parse(msg)
    what = "release %s" % m["version"]
    r["held"] = used() - base  # trust loaded, the offer parsed: before the check
    for i in range(REPEAT):
        gc.collect()
        gc.disable()
        a = gc.mem_alloc()
        t = time.ticks_us()
        try:
            trust.check(keys, dict(e), what)  # (a copy: the check takes the signature out)
            r["ok"] = True
        except trust.No as x:
            r["ok"] = str(x.args)
        times[i] = time.ticks_diff(time.ticks_us(), t)
        r["alloc"] = gc.mem_alloc() - a
        gc.enable()
    times.sort()
    r["us"] = times[len(times) // 2]
    r["min_us"] = times[0]
    e = m = trust = what = None
    agent.drop()
    r["after"] = used() - base  # the names interned by the first load stay (the interpreter's table)
    return r


for bits, keys, msg in CASES:
    print("RESULT", json.dumps(one(bits, keys, msg.encode())))

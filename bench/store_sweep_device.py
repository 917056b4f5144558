# Runs on the MicroPython unix port (bench/store.py --sweep starts it): one shard of
# the flash power-cut sweep (host/portable/cutsweep.py), then the plain-replay check of a
# few of its cut points. One JSON line.
#   micropython store_sweep_device.py KIND ROUNDS AGED SHARD NSHARDS SAMPLES
import json
import sys
import time

import cutsweep

kind = sys.argv[1]
rounds, aged, shard, nshards, samples = [int(a) for a in sys.argv[2:7]]
t0 = time.ticks_ms()
sw = cutsweep.Sweep(kind, rounds, shard=shard, nshards=nshards, samples=samples, aged=aged).run()
t1 = time.ticks_ms()
bad = sw.replay()
t2 = time.ticks_ms()
print(
    json.dumps(
        {
            "kind": kind,
            "ops": sw.ops,
            "tally": sw.tally,
            "errors": sw.errors,
            "recovery_ops": sw.recovery_ops,
            "replayed": len(sw.picked),
            "replay_bad": ["op %d%s: %s" % (k, " torn" if p else "", why) for k, p, why in bad],
            "sweep_ms": time.ticks_diff(t1, t0),
            "replay_ms": time.ticks_diff(t2, t1),
        }
    )
)

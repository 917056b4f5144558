"""Fleet simulator bench: N simulated devices (fleetwire's asyncio client and vitals
agent each) in one CPython process against a local mosquitto, real time; prints the
records per second reached, the CPU used and the last publish latencies.

    .venv/bin/python bench/fleet_sim.py 1000 60      # devices, seconds (1 s period)
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import asyncio, time, resource, json  # noqa: E401
from fleetwire.host.fleet.sim import Simulator, raise_fd_limit
from fleetwire.host.brokers.mosquitto import Mosquitto

raise_fd_limit(4096)
print("fd limit", resource.getrlimit(resource.RLIMIT_NOFILE))
b = Mosquitto(max_queued=100000).start()
n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
dur = float(sys.argv[2]) if len(sys.argv) > 2 else 60
sim = Simulator(
    b.host,
    b.port,
    devices=n,
    period_s=1,
    speed=1,
    duration=dur,
    seed=5,
    wifi_drops_per_hour=0,
    silent_share=0,
)
t0 = time.time()
c0 = time.process_time()
res = asyncio.run(sim.run())
wall = time.time() - t0
cpu = time.process_time() - c0
mcpu = 0
try:
    with open("/proc/%d/stat" % b.proc.pid) as f:
        parts = f.read().split()
        mcpu = (int(parts[13]) + int(parts[14])) / os.sysconf("SC_CLK_TCK")
except Exception as e:
    print(e)
print(json.dumps(res))
print(
    "devices %d, wall %.1f s, records %d -> %.0f records/s (target %d/s), "
    "sim process CPU %.1f s (%.0f%% of a core), mosquitto CPU %.1f s"
    % (n, wall, res["sent"], res["sent"] / dur, n, cpu, 100 * cpu / wall, mcpu)
)
lats = [d.vitals.latency_ms for d in sim.devices if d.vitals and d.vitals.latency_ms is not None]
lats.sort()
if lats:
    print(
        "last publish latency ms: p50 %d p95 %d max %d"
        % (lats[len(lats) // 2], lats[int(len(lats) * 0.95)], lats[-1])
    )
print("connected at end", sim.connected())
b.stop()

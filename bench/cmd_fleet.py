"""How long a fleet takes to answer a command and to converge on a desired state, and to
converge again after a broker restart: simulated devices (fleetwire.host.fleet.sim, each with
fleetwire.cmd and fleetwire.desired over its own AsyncClient, in one process) against a real
mosquitto with persistence, driven by the operator's API (fleetwire.host.command).

    .venv/bin/python bench/cmd_fleet.py [--devices 1000]

Prints one table row a step: how long until every device had answered or reported the version.
"""

import argparse
import asyncio
import os
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from fleetwire.host.brokers.mosquitto import Mosquitto  # noqa: E402
from fleetwire.host.command.operator import Operator  # noqa: E402
from fleetwire.host.fleet.sim import Simulator  # noqa: E402


def until(cond, timeout):
    end = time.time() + timeout
    while not cond() and time.time() < end:
        time.sleep(0.2)
    return cond()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--devices", type=int, default=1000)
    ap.add_argument("--timeout", type=float, default=600, help="s each step may take at most")
    args = ap.parse_args()
    n, T = args.devices, args.timeout
    ids = ["sim-%04d" % i for i in range(n)]
    rows = []
    with Mosquitto(persistence=True, max_queued=100000) as b:
        sim = Simulator(
            b.host,
            b.port,
            devices=n,
            period_s=600,  # few records: commands and state are the traffic
            speed=1,
            duration=10**6,
            seed=7,
            rollout=(10**6, 10**6),
            wifi_drops_per_hour=0,
            silent_share=0,
            commands=True,
            profiles={v: {"crash_per_hour": 0.0, "boot_crash": 0.0} for v in ("1.4.2", "1.5.0")},
        )
        res = {}
        t = threading.Thread(target=lambda: res.update(asyncio.run(sim.run())))
        t0 = time.time()
        t.start()
        try:
            assert sim.started.wait(60)
            assert until(lambda: all(d.subscribed for d in sim.devices), T), "not all subscribed"
            rows.append(("every device connected and subscribed", time.time() - t0))
            with Operator(b.host, b.port) as op:

                def step(what, fn):
                    t1 = time.time()
                    rows.append((what % fn(), time.time() - t1))

                step("a command to every device, answered (%d)", lambda: len(op.run(ids, "ping", timeout=T)))

                def converge(period):
                    op.set_desired(ids, {"config": {"period_s": period}})
                    return len(op.wait_converged(ids, T))

                step("a desired state, every device reported it (%d left)", lambda: converge(300))
                # the broker restarts (its sessions and retained documents on disk); the devices
                # reconnect, then a change of state reaches them all
                up = lambda: all(d.client.is_connected() for d in sim.devices if d.client)  # noqa: E731
                step("a broker restart, every device back (%s)", lambda: b.restart() or until(up, T))
                op.c.reconnect()
                step("then a desired state, every device reported it (%d left)", lambda: converge(240))
        finally:
            sim.stop_after(0)
            t.join(120)
    print("%d simulated devices (one process), mosquitto on loopback" % n)
    print("| step | s |")
    print("| --- | ---: |")
    for what, s in rows:
        print("| %s | %.1f |" % (what, s))


if __name__ == "__main__":
    main()

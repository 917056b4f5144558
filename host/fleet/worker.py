"""One worker process of a simulated fleet (fleetwire.host.fleet.workers): runs its share of
the devices with fleetwire.host.fleet.sim.Simulator and talks to its parent in JSON lines.

    python -m fleetwire.host.fleet.worker     (its parent starts it; nobody else)

stdin, from the parent: first the run's options ({"host", "port", "only", "ca", ...}), then
{"go": [t0, start_ms]} (the clock every worker starts from), later perhaps {"end": t}
(CLOCK_MONOTONIC, the machine's: when the run stops). End of input: the parent is gone, stop.
stdout, to the parent: {"ready": ...} once its devices' certificates are loaded, {"status": ...}
every second, {"summary": ...} at the end."""

import asyncio
import json
import sys
import threading
import time


def status(sim, first=False):
    out = {
        "sent": sim.sent,
        "acked": sim.acked,
        "records_acked": sim.records_acked,
        "errors": sim.errors,
        "publish_fail": sim.publish_fail,
        "boots": sim.boots,
        "crashes": sim.crashes,
        "wifi_drops": sim.drops,
        "connected": sim.connected(),
        "versions": sim.versions(),
        "lag": sim.lag.summary(),
        "last_error": sim.last_error,
    }
    if first:  # when each device of the story goes silent, simulated hours: the parent's clock tells
        out["silent_at_h"] = {d.id: d.silent_at * sim.hours for d in sim.devices if d.silent_at is not None}
    return out


def main():
    from fleetwire.host.fleet.sim import Simulator

    out_lock = threading.Lock()

    def send(**msg):
        with out_lock:
            sys.stdout.write(json.dumps(msg, separators=(",", ":")) + "\n")
            sys.stdout.flush()

    opts = json.loads(sys.stdin.readline())
    host, port = opts.pop("host"), opts.pop("port")
    ca = opts.pop("ca", None)
    if ca:
        from fleetwire.host.identity import pki

        ca = pki.FleetCA(ca)
    if opts.get("rollout") is not None:
        opts["rollout"] = tuple(opts["rollout"])
    sim = Simulator(host, port, ca=ca, **opts)
    go = {}
    went = threading.Event()

    def listen():
        for line in sys.stdin:
            msg = json.loads(line)
            if "go" in msg:
                go["at"] = msg["go"]
                went.set()
            if "end" in msg:
                sim.end = msg["end"]
        sim.end = time.monotonic()  # the parent is gone: stop
        went.set()

    async def start():
        send(ready=len(sim.only))
        await asyncio.get_running_loop().run_in_executor(None, went.wait)
        return go.get("at") or (time.monotonic(), None)

    def progress(s):
        progress.n += 1
        send(status=status(s, first=progress.n == 1))

    progress.n = 0
    sim.progress = progress
    threading.Thread(target=listen, daemon=True).start()
    res = asyncio.run(sim.run(start))
    send(status=status(sim), summary=res)


if __name__ == "__main__":
    main()

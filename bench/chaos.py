"""Chaos bench: clients publish through the fault-injecting proxy while it cuts
every connection at a random point (a random byte offset either way, or after a
random packet), plus a few blackholes that only keepalive can notice. An
independent subscriber counts what arrives. Prints a table per client:
cut points, messages, delivered, lost, duplicated, reconnects, time to recover.

    .venv/bin/python bench/chaos.py [--cuts 10000] [--qos 2] [--blackholes 2] [--clients ...]

Clients: fleetwire on MicroPython (unix port, 96 KB heap), fleetwire on CPython,
and paho-mqtt (PyPI) on CPython, each against the same mosquitto in one run.
Time to recover: from a cut to the next CONNACK the client receives.
"""

import argparse
import collections
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from fleetwire.host.rig import build, micropython  # noqa: E402
from fleetwire.host.brokers.mosquitto import Mosquitto  # noqa: E402
from fleetwire.host.testing.proxy import Proxy  # noqa: E402

DEVICE = os.path.join(HERE, "chaos_device.py")
KEEPALIVE = 1


class Counter:
    """An independent paho-mqtt subscriber (QoS 2) counting payloads per topic."""

    def __init__(self, broker):
        import paho.mqtt.client as mqtt

        self.counts = collections.defaultdict(collections.Counter)
        self.lock = threading.Lock()
        self.c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="chaos-counter-%d" % os.getpid())
        self.c.on_message = self._msg
        self.c.connect(broker.host, broker.port)
        self.c.subscribe("chaos/#", 2)
        self.c.loop_start()
        time.sleep(0.3)

    def _msg(self, client, userdata, m):
        with self.lock:
            self.counts[m.topic][m.payload] += 1

    def total(self, topic):
        with self.lock:
            return sum(self.counts[topic].values())

    def close(self):
        self.c.disconnect()
        self.c.loop_stop()


def random_cuts(rng, qos, n=997):
    """Cut points that each fire within a connection that carries the workload."""
    ack, done = ("PUBREC", "PUBCOMP") if qos == 2 else ("PUBACK", "PUBACK")
    cuts = []
    for _ in range(n):
        r = rng.random()
        if r < 0.7:
            cuts.append(dict(direction=rng.choice(["up", "down"]), at=rng.randrange(0, 240)))
        elif r < 0.75:
            cuts.append(dict(direction="up", after="CONNECT"))
        elif r < 0.8:
            cuts.append(dict(direction="down", after="CONNACK"))
        else:
            d, k = rng.choice(
                [("up", "PUBLISH"), ("down", ack), ("down", done)] + ([("up", "PUBREL")] if qos == 2 else [])
            )
            cuts.append(dict(direction=d, after=k, nth=rng.randrange(1, 5)))
    return cuts


def chaos(proxy, want_cuts, blackholes, qos, stop):
    """Cut every connection at a random point; now and then black the link out."""
    rng = random.Random(7)
    cuts = random_cuts(rng, qos)
    proxy.cut(**cuts[-1])  # the connection already up, if any
    proxy.cut_each_connection(*cuts)
    marks = sorted(rng.sample(range(want_cuts // 10, want_cuts), blackholes)) if blackholes else []
    while not stop.is_set():
        if marks and proxy.cuts >= marks[0]:
            marks.pop(0)
            proxy.cut_each_connection()
            proxy.blackhole(True)
            stop.wait(KEEPALIVE * 2 + 0.5)  # only keepalive can tell
            proxy.blackhole(False)
            proxy.cut_each_connection(*cuts)
            proxy.cut(**rng.choice(cuts))  # the connection made during the blackout
        if proxy.cuts >= want_cuts:
            proxy.cut_each_connection()  # enough: let the client finish
            return
        stop.wait(0.01)


def run_device(interp, lib, broker, counter, cuts, qos, blackholes, n):
    proxy = Proxy((broker.host, broker.port)).start()
    topic = "chaos/%s" % interp
    if interp == "micropython":
        cmd = [micropython.binary(), "-X", "heapsize=96K", DEVICE]
        env = dict(os.environ, MICROPYPATH=lib + os.pathsep + ".frozen")
    else:
        cmd, env = [sys.executable, "-u", DEVICE], dict(os.environ)
    stop = threading.Event()
    t = threading.Thread(target=chaos, args=(proxy, cuts, blackholes, qos, stop), daemon=True)
    t.start()
    t0 = time.monotonic()
    proc = subprocess.Popen(
        cmd + ["127.0.0.1", str(proxy.port), "chaos-" + interp, topic, str(qos), str(n), str(KEEPALIVE)],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    t.join()  # the chaos thread ends once enough cuts were made
    try:
        proc.stdin.write("stop\n")
        proc.stdin.flush()
    except BrokenPipeError:
        pass  # it had published all n already
    out, err = proc.communicate(timeout=600)
    stop.set()
    if proc.returncode:
        sys.exit("%s device failed: %s" % (interp, err[-2000:]))
    res = json.loads(out.strip().splitlines()[-1])
    n = res["published"]
    res["wall"] = time.monotonic() - t0
    return finish("fleetwire (%s)" % interp, proxy, counter, topic, n, qos, res["connects"] - 1, res)


def run_paho(broker, counter, cuts, qos, blackholes, n):
    import paho.mqtt.client as mqtt

    proxy = Proxy((broker.host, broker.port)).start()
    topic = "chaos/paho"
    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="chaos-paho", clean_session=False)
    c.reconnect_delay_set(min_delay=0.005, max_delay=0.01)
    c.max_inflight_messages_set(8)
    connects = [0]
    c.on_connect = lambda *a: connects.__setitem__(0, connects[0] + 1)
    assert n < 65535  # paho's message ids would wrap
    c.connect(broker.host, proxy.port, keepalive=KEEPALIVE)
    c.loop_start()
    stop = threading.Event()
    t = threading.Thread(target=chaos, args=(proxy, cuts, blackholes, qos, stop), daemon=True)
    t.start()
    t0 = time.monotonic()
    # paho keeps a QoS 1/2 message published while disconnected (rc NO_CONN) and
    # sends it after the reconnect; on_publish says when each completes.
    infos = [c.publish(topic, b"%06d" % i, qos=qos) for i in range(n)]
    deadline = time.monotonic() + max(120, n / 50)
    while sum(i._published for i in infos) < n and time.monotonic() < deadline:
        time.sleep(0.05)
    wall = time.monotonic() - t0
    stop.set()
    done = sum(i._published for i in infos)
    c.disconnect()
    c.loop_stop()
    return finish(
        "paho-mqtt 2 (CPython)",
        proxy,
        counter,
        topic,
        n,
        qos,
        connects[0] - 1,
        {"wall": wall, "unacked": n - done},
    )


def finish(name, proxy, counter, topic, n, qos, reconnects, res):
    end = time.monotonic() + 10
    while counter.total(topic) < n and time.monotonic() < end:
        time.sleep(0.05)
    time.sleep(0.5)  # late duplicates
    counts = counter.counts[topic]
    want = [b"%06d" % i for i in range(n)]
    lost = sum(1 for m in want if counts[m] == 0)
    dup = sum(counts[m] - 1 for m in want if counts[m] > 1)
    rec = proxy.recoveries
    proxy.stop()
    return {
        "client": name,
        "cuts": proxy.cuts,
        "messages": n,
        "delivered": sum(1 for m in want if counts[m]),
        "lost": lost,
        "dup": dup,
        "reconnects": reconnects,
        "recover_ms": statistics.median(rec) * 1000 if rec else float("nan"),
        "recover_p95_ms": sorted(rec)[int(len(rec) * 0.95)] * 1000 if rec else float("nan"),
        "wall": res["wall"],
        "note": ("%d never acknowledged" % res["unacked"]) if res.get("unacked") else "",
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cuts", type=int, default=10000, help="cut points per fleetwire client (default 10000)")
    ap.add_argument(
        "--paho-cuts",
        type=int,
        default=2000,
        help="paho: messages = 3 x this (it goes through few cuts: see bench/README.md, Chaos)",
    )
    ap.add_argument("--qos", type=int, default=2, choices=(1, 2))
    ap.add_argument(
        "--blackholes", type=int, default=2, help="blackouts per client (keepalive %d s)" % KEEPALIVE
    )
    ap.add_argument("--clients", default="micropython,cpython,paho")
    a = ap.parse_args()
    clients = a.clients.split(",")
    lib = None
    if "micropython" in clients:
        out = tempfile.mkdtemp(prefix="fleetwire-chaos-")
        build.build(out, mpy=True)
        lib = os.path.join(out, "lib")
    rows = []
    with Mosquitto() as broker:
        counter = Counter(broker)
        try:
            for cl in clients:
                print("running %s ..." % cl, file=sys.stderr, flush=True)
                if cl == "paho":
                    rows.append(run_paho(broker, counter, a.paho_cuts, a.qos, a.blackholes, a.paho_cuts * 3))
                else:
                    # it publishes until the cuts are done (at most 100 messages a cut)
                    rows.append(
                        run_device(cl, lib, broker, counter, a.cuts, a.qos, a.blackholes, a.cuts * 100)
                    )
        finally:
            counter.close()
    print(
        "\nChaos bench: QoS %d, every connection cut at a random point, %d blackouts per client, "
        "mosquitto %s" % (a.qos, a.blackholes, broker.binary)
    )
    hdr = (
        "client",
        "cut points",
        "messages",
        "delivered",
        "lost",
        "duplicated",
        "reconnects",
        "recover p50 ms",
        "recover p95 ms",
        "seconds",
    )
    print("| " + " | ".join(hdr) + " |")
    print("|" + "---|" * len(hdr))
    for r in rows:
        print(
            "| %s | %d | %d | %d | %d | %d | %d | %.1f | %.1f | %.1f |%s"
            % (
                r["client"],
                r["cuts"],
                r["messages"],
                r["delivered"],
                r["lost"],
                r["dup"],
                r["reconnects"],
                r["recover_ms"],
                r["recover_p95_ms"],
                r["wall"],
                (" " + r["note"]) if r["note"] else "",
            )
        )
    print("\ncut points in all: %d" % sum(r["cuts"] for r in rows))


if __name__ == "__main__":
    main()

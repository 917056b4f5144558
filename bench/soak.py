"""The soak bench: the everything program (a ring store on a flash partition, reconnect=True,
QoS 1 and 2 both ways, a will) on each front, MQTTClient and AsyncClient, for minutes through
the fault-injecting proxy, which resets every connection at a random byte count (either
direction, up to --cut-max bytes in). A paho-mqtt subscriber counts what the device published;
a paho-mqtt publisher sends it numbered messages meanwhile (QoS 1 and 2 in turn).

    .venv/bin/python bench/soak.py --binary PLAIN32 [--heap 40] [--seconds 120] [--fronts blocking,asyncio]

PLAIN32 is a plain 32-bit unix port (only the port's own modules frozen: an ESP32's object
sizes and a stock firmware's frozen modules; bench/heap.py builds one with --micropython-src,
--build-dir keeps it); without --binary the suite's 64-bit port runs it. fleetwire runs from
.mpy, as a board holds it; the device program and its flash file are .mpy too.

Per front, one row: the cuts made; messages accepted by publish(), delivered to the subscriber,
lost (accepted and never delivered), duplicated at QoS 2, QoS 1 sent again (allowed);
inbound: sent by the broker to the device, missing, duplicated at QoS 2; MemoryErrors the
program met (raised to it, or ending a link); the lowest free heap sampled; the heap held
after everything completed against the heap held once connected (gc.mem_alloc() after
gc.collect()); the reconnects. A run ends by stopping the cuts and waiting until everything
accepted is complete.
"""

import argparse
import collections
import json
import os
import random
import shutil
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

sys.path.insert(0, HERE)
from client import compile_mpy  # noqa: E402


class Parties:
    """The paho-mqtt side: a subscriber counting the device's messages and its wills, and a
    publisher sending it numbered messages at a steady rate."""

    def __init__(self, broker, topic, rate):
        import paho.mqtt.client as mqtt

        self.topic = topic
        self.counts = collections.Counter()
        self.wills = 0
        self.sent = []  # (number, qos) the broker accepted for the device
        self.lock = threading.Lock()
        self.stop = threading.Event()
        v2 = mqtt.CallbackAPIVersion.VERSION2
        self.sub = mqtt.Client(v2, client_id="soak-sub-%d" % os.getpid())
        self.sub.on_message = self._msg
        self.sub.connect(broker.host, broker.port)
        self.sub.subscribe([(topic + "/out", 2), (topic + "/will", 1)])
        self.sub.loop_start()
        self.pub = mqtt.Client(v2, client_id="soak-pub-%d" % os.getpid())
        self.pub.connect(broker.host, broker.port)
        self.pub.loop_start()
        self.rate = rate
        time.sleep(0.3)

    def _msg(self, client, userdata, m):
        with self.lock:
            if m.topic.endswith("/will"):
                self.wills += 1
            else:
                self.counts[int(m.payload[1:])] += 1

    def feed(self):
        i = 0
        while not self.stop.wait(1 / self.rate):
            qos = 1 + i % 2
            info = self.pub.publish(self.topic + "/in", b"i%d" % i, qos=qos)
            info.wait_for_publish(10)
            self.sent.append((i, qos))
            i += 1

    def close(self):
        self.stop.set()
        for c in (self.sub, self.pub):
            c.loop_stop()
            c.disconnect()


def chaos(proxy, stop, cut_max, rng):
    """Arm one reset at a random byte count on every connection the device makes."""
    seen = 0
    while not stop.is_set():
        if proxy.accepted > seen:
            seen = proxy.accepted
            proxy.cut(rng.choice(("up", "down")), at=rng.randrange(cut_max))
        time.sleep(0.005)


def soak(front, binary, heap, lib, harness, broker, seconds, cut_max, rate, seed, tmp):
    topic = "soak/%s" % front
    proxy = Proxy((broker.host, broker.port)).start()
    parties = Parties(broker, topic, rate)
    flash = os.path.join(tmp, "soak-%s.flash" % front)
    env = dict(os.environ, MICROPYPATH=os.pathsep.join([harness, lib, ".frozen"]))
    cmd = [binary, "-X", "heapsize=%dK" % heap, "-m", "soak_device", front, "127.0.0.1"]
    cmd += [str(proxy.port), "soak-" + front, topic, flash, str(int(rate * seconds * 1.2) + 100)]
    stop = threading.Event()
    dev = subprocess.Popen(
        cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    threads = [
        threading.Thread(target=chaos, args=(proxy, stop, cut_max, random.Random(seed)), daemon=True),
        threading.Thread(target=parties.feed, daemon=True),
    ]
    for t in threads:
        t.start()
    try:
        time.sleep(seconds)
        stop.set()
        parties.stop.set()
        for t in threads:
            t.join()
        proxy.clear()
        out, err = dev.communicate("stop\n", timeout=120)
    finally:
        if dev.poll() is None:
            dev.kill()
        proxy.stop()
    if dev.returncode:
        sys.exit("the device program failed (%s):\n%s" % (front, err[-3000:]))
    lines = out.strip().splitlines()
    r = json.loads(lines[-1])
    counts_in = bytes.fromhex("".join(x[3:] for x in lines if x.startswith("IN ")))
    time.sleep(1)  # the last deliveries, and any late duplicate
    parties.close()
    sent = r["accepted"]
    counts = parties.counts
    got_in = {}  # inbound number -> times it arrived (3: three or more), 2 bits each
    for i, b in enumerate(counts_in):
        for j in range(4):
            if b >> 2 * j & 3:
                got_in[4 * i + j] = b >> 2 * j & 3
    row = {
        "front": front,
        "cuts": proxy.cuts,
        "accepted": sent,
        "delivered": sum(1 for m in range(sent) if counts[m]),
        "lost": sum(1 for m in range(sent) if not counts[m]),
        "dup_q2": sum(1 for m in range(sent) if m % 2 and counts[m] > 1),
        "again_q1": sum(1 for m in range(sent) if not m % 2 and counts[m] > 1),
        "strangers": sum(1 for m in counts if m >= sent),
        "in_sent": len(parties.sent),
        "in_missing": sum(1 for k, q in parties.sent if k not in got_in),
        "in_dup_q2": sum(1 for k, q in parties.sent if q == 2 and got_in.get(k, 0) > 1),
        "memory_errors": r["memory_errors"],
        "other_errors": r["other_errors"],
        "lowest_free": r["lowest_free"],
        "held_start": r["start_alloc"],
        "held_end": r["end_alloc"],
        "reconnects": r["connected"] - 1,
        "pending": r["pending"],
        "wills": parties.wills,
    }
    return row


COLUMNS = (
    ("front", "front"),
    ("cuts", "cuts"),
    ("accepted", "accepted"),
    ("delivered", "delivered"),
    ("lost", "lost"),
    ("dup_q2", "QoS 2 dup"),
    ("again_q1", "QoS 1 again"),
    ("in_sent", "in: sent"),
    ("in_missing", "in: missing"),
    ("in_dup_q2", "in: QoS 2 dup"),
    ("memory_errors", "MemoryErrors"),
    ("lowest_free", "lowest free B"),
    ("held_start", "held at start B"),
    ("held_end", "held at end B"),
    ("reconnects", "reconnects"),
)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", help="a plain 32-bit unix port (default: the suite's 64-bit port)")
    ap.add_argument("--heap", type=int, default=40, help="-X heapsize in KB (default 40)")
    ap.add_argument("--seconds", type=float, default=120, help="how long each front soaks (default 120)")
    ap.add_argument("--fronts", default="blocking,asyncio")
    ap.add_argument("--cut-max", type=int, default=1500, help="cut within this many bytes of a connection")
    ap.add_argument("--rate", type=float, default=10, help="inbound messages a second (default 10)")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    binary = os.path.abspath(args.binary) if args.binary else micropython.binary()
    r = subprocess.run([binary, "-c", "import sys; print(sys.maxsize)"], capture_output=True, text=True)
    bits = 32 if r.stdout.strip() == str(2**31 - 1) else 64
    tmp = tempfile.mkdtemp(prefix="fw-soak-")
    try:
        harness = os.path.join(tmp, "harness")
        os.makedirs(harness)
        for m in ("soak_device", "flashfile"):
            compile_mpy(os.path.join(HERE, m + ".py"), harness, m)
        build.build(os.path.join(tmp, "board"), mpy=True)
        lib = os.path.join(tmp, "board", "lib")
        rows = []
        with Mosquitto() as broker:
            for front in args.fronts.split(","):
                print("soaking %s for %g s ..." % (front, args.seconds), file=sys.stderr, flush=True)
                rows.append(
                    soak(
                        front,
                        binary,
                        args.heap,
                        lib,
                        harness,
                        broker,
                        args.seconds,
                        args.cut_max,
                        args.rate,
                        args.seed,
                        tmp,
                    )
                )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(
        "%d-bit unix port, -X heapsize=%dK, %g s a front, a reset within %d bytes of every connection, "
        "%g inbound messages/s; `bench/soak.py %s`"
        % (bits, args.heap, args.seconds, args.cut_max, args.rate, " ".join(sys.argv[1:]))
    )
    print()
    print("| " + " | ".join(h for _, h in COLUMNS) + " |")
    print("|" + "---|" * len(COLUMNS))
    for row in rows:
        print("| " + " | ".join(str(row[k]) for k, _ in COLUMNS) + " |")
    bad = [r for r in rows if r["lost"] or r["dup_q2"] or r["in_missing"] or r["in_dup_q2"] or r["pending"]]
    if bad:
        print("\nFAILED: %s" % ", ".join(r["front"] for r in bad))
        sys.exit(1)


if __name__ == "__main__":
    main()

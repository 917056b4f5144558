"""Store benchmark: flash cost per message of the ring store (raw partition) and
the file store (one file per message on LittleFS), on the MicroPython unix port
with the emulated NOR flash: a 256 KB partition of 4 KB blocks. Prints a table.

    .venv/bin/python bench/store.py [--n 2000] [--sweep | --sweep-only] [--jobs 2]

Columns: erases and bytes programmed per message (and programmed / packet size),
host time per message (publish + send + PUBACK, emulated flash), RAM the store
adds to the client, heap allocated per message (the emulator's reads included),
and the projected life of the partition at one message a second on flash rated
for 100,000 erase cycles (wear spread over all blocks, as both stores do).

--sweep also runs the full power-cut sweep (host/portable/cutsweep.py) on MicroPython, in
--jobs worker processes (at most 2): the ring store on a new and on an aged
partition, the file store on LittleFS. A device and its broker play a workload
(QoS 1 and 2 publishes, PUBACK, PUBREC/PUBREL/PUBCOMP, inbound QoS 2 held until
PUBREL, the ring wrapping and moving live records, resets); at every flash
operation, cut once cleanly and once half done, the device is reset, mounts the
store, reconnects and finishes the work, and each message is checked: lost,
resurrected (completed, then sent again), duplicated (QoS 2 twice). A table per
store: cut points and outcomes by what was under way at the cut.
"""

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from fleetwire.host.rig import build, micropython  # noqa: E402
from fleetwire.host.portable import PATH as PORTABLE  # noqa: E402

BLOCKS = 64
CYCLES = 100000


def run(lib, kind, payload, outstanding, n):
    env = dict(os.environ, MICROPYPATH=os.pathsep.join([lib, ".frozen", PORTABLE]))
    r = subprocess.run(
        [
            micropython.binary(),
            "-X",
            "heapsize=2M",
            os.path.join(HERE, "store_device.py"),
            kind,
            str(payload),
            str(outstanding),
            str(n),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    if r.returncode:
        sys.exit("%s %s: %s" % (kind, payload, r.stderr))
    return json.loads(r.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=2000, help="messages per ring configuration")
    ap.add_argument("--sweep", action="store_true", help="also run the full power-cut sweep")
    ap.add_argument("--sweep-only", action="store_true", help="only the power-cut sweep")
    ap.add_argument("--jobs", type=int, default=2, choices=(1, 2), help="sweep worker processes")
    ap.add_argument("--rounds", type=int, default=0, help="workload rounds per sweep (default: full size)")
    a = ap.parse_args()
    out = tempfile.mkdtemp(prefix="fleetwire-bench-store-")
    try:
        build.build(out, mpy=True)
        lib = os.path.join(out, "lib")
        if not a.sweep_only:
            measure(a, lib)
        if a.sweep or a.sweep_only:
            sweep(a, lib)
    finally:
        shutil.rmtree(out, ignore_errors=True)


def measure(a, lib):
    rows = []
    for payload in (32, 100, 200, 1000):
        for outstanding in (1, 16):
            for kind in ("ring", "file"):
                rows.append(
                    run(lib, kind, payload, outstanding, a.n if kind == "ring" else max(200, a.n // 6))
                )
    head = (
        "store",
        "payload",
        "out",
        "packet B",
        "erases/msg",
        "prog B/msg",
        "prog/packet",
        "us/msg",
        "RAM B",
        "alloc B/msg",
        "life (years)",
    )
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rows:
        life = BLOCKS * CYCLES / r["erases"] / 31557600 if r["erases"] else float("inf")
        print(
            "| %s | %d | %d | %d | %.4f | %.0f | %.2f | %.0f | %d | %.0f | %.1f |"
            % (
                r["kind"],
                r["payload"],
                r["outstanding"],
                r["packet"],
                r["erases"],
                r["programmed"],
                r["programmed"] / r["packet"],
                r["us"],
                r["ram"],
                r["alloc"],
                life,
            )
        )
    print()
    for payload in (100, 200, 1000):
        for outstanding in (1, 16):
            ring = [
                r
                for r in rows
                if r["kind"] == "ring" and r["payload"] == payload and r["outstanding"] == outstanding
            ][0]
            f = [
                r
                for r in rows
                if r["kind"] == "file" and r["payload"] == payload and r["outstanding"] == outstanding
            ][0]
            print(
                "payload %4d, %2d outstanding: ring store erases %.0fx fewer than one file per message"
                % (payload, outstanding, f["erases"] / ring["erases"] if ring["erases"] else float("inf"))
            )


# (title, store, workload rounds, messages the partition saw before, heap)
SWEEPS = (
    ("ring store, new partition", "ring", 24, 0, "256K"),
    (
        "ring store, aged partition: record sequence numbers and packet ids wrap at 65536 during the "
        "workload",
        "ring",
        24,
        65300,
        "256K",
    ),
    ("file store on LittleFS", "file", 12, 0, "256K"),
)
STEPS = (
    ("publish", "publish()"),
    ("send", "sending a stored message"),
    ("puback", "PUBACK"),
    ("pubrec", "PUBREC"),
    ("pubcomp", "PUBCOMP"),
    ("in_publish", "inbound QoS 2 PUBLISH"),
    ("in_pubrel", "inbound PUBREL, after delivery"),
    ("connack", "CONNACK"),
    ("mount", "planned reset: mount"),
    ("restore", "a 2nd cut, in the mount after the 1st"),
    ("idle", "between calls"),
)
OUTCOMES = ("lost", "resurrected", "duplicated", "QoS 1 resent (allowed)", "reordered", "errors")


def sweep_shard(lib, kind, rounds, aged, heap, shard, jobs):
    env = dict(os.environ, MICROPYPATH=os.pathsep.join([lib, ".frozen", PORTABLE]))
    return subprocess.Popen(
        [
            micropython.binary(),
            "-X",
            "heapsize=" + heap,
            os.path.join(HERE, "store_sweep_device.py"),
            kind,
            str(rounds),
            str(aged),
            str(shard),
            str(jobs),
            "4",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def sweep(a, lib):
    print(
        "\npower-cut sweep on the MicroPython unix port (%d worker process%s)"
        % (a.jobs, "es" if a.jobs > 1 else "")
    )
    grand = 0
    t_all = time.monotonic()
    for title, kind, rounds, aged, heap in SWEEPS:
        rounds = a.rounds or rounds
        t0 = time.monotonic()
        c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        procs = [sweep_shard(lib, kind, rounds, aged, heap, k, a.jobs) for k in range(a.jobs)]
        res = []
        for p in procs:
            out, err = p.communicate()
            if p.returncode:
                sys.exit("sweep of the %s: exit %d\n%s" % (kind, p.returncode, err[-3000:]))
            res.append(json.loads(out.strip().splitlines()[-1]))
        wall = time.monotonic() - t0
        tally = {}
        for r in res:
            for phase, row in r["tally"].items():
                t = tally.setdefault(phase, [0] * len(row))
                for i, v in enumerate(row):
                    t[i] += v
        cuts = sum(t[0] for t in tally.values())
        second = sum(t[0] for p, t in tally.items() if p.startswith("restore:"))
        grand += cuts
        print("\n%s: rounds=%d, -X heapsize=%s" % (title, rounds, heap))
        table(tally)
        c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = c1.ru_utime + c1.ru_stime - c0.ru_utime - c0.ru_stime  # the workers' own CPU time
        print(
            "\n%d flash operations in the workload, each cut twice (cleanly, half done): %d cut "
            "points in the workload, %d more in the mounts after them (a second cut); the recoveries "
            "made %d flash operations; %.0f s wall, %.0f s CPU"
            % (
                sum(r["ops"] for r in res) // len(res),
                cuts - second,
                second,
                sum(r["recovery_ops"] for r in res),
                wall,
                cpu,
            )
        )
        bad = [b for r in res for b in r["replay_bad"]]
        print(
            "replayed plainly (flash armed, workload run until the cut): %d cut points, %s"
            % (
                sum(r["replayed"] for r in res),
                "flash and world as the fork left them" if not bad else "DIFFERENT: " + "; ".join(bad),
            )
        )
        notes = [e for r in res for e in r["errors"]]
        if notes:
            print("first failures:")
            for e in sorted(notes, key=lambda e: int(e.split()[1]))[:6]:
                print("  " + e)
    print("\n%d cut points in all, %.0f s" % (grand, time.monotonic() - t_all))


def table(tally):
    head = (
        ("under way at the cut", "flash operation", "cut points")
        + tuple("msgs " + o for o in OUTCOMES[:5])
        + ("errors",)
    )
    print("| " + " | ".join(head) + " |")
    print("|---|---|" + "---:|" * (len(head) - 2))
    total = [0] * (len(OUTCOMES) + 1)
    order = [k for k, _ in STEPS]
    names = dict(STEPS)
    for phase in sorted(tally, key=lambda p: (order.index(p.split(": ")[0]), p)):
        step, op = phase.split(": ", 1)
        row = tally[phase]
        total = [x + y for x, y in zip(total, row)]
        print("| %s | %s | %s |" % (names[step], op, " | ".join(str(v) for v in row)))
    print("| **all** | | %s |" % " | ".join("**%d**" % v for v in total))


if __name__ == "__main__":
    main()

"""What an over-the-air update costs a board's heap while it downloads (fleetwire.ota), by
chunk size and by release size, on the MicroPython unix port: fleetwire from .mpy, a client
connected to mosquitto, the update service (fleetwire.host.rollout.service) serving an app bundle.

    .venv/bin/python bench/ota_heap.py [--micropython32 BINARY] [--heap 256K]

For each port, chunk size (the client's max_packet is the chunk plus its header and topic)
and release size (16 KB to 256 KB of one file):
- updater idle: what importing fleetwire.ota and making its `Updater` holds, over the
  connected client (the resident module and its state); "of it, names" is how much the
  interpreter's table of interned names grew (micropython.qstr_info(): the update's names, and
  when a pool is full a new one, whose spare room later names take);
- held downloading: the heap in use (after a collection) 8 chunks into the download;
- peak: the most in use at any chunk (inside the write, the client's message alive), in the
  check and at the switch (fleetwire.ota.ops loaded, unpacking); the offer's signature check
  is bench/trust.py's;
- per chunk: bytes allocated per chunk by everything (the client's message as `bytes`, its
  acknowledgement, the updater's requests: a run without collections), and by the updater's
  own handling of a chunk;
- after switch: what stays in use once the release was checked, unpacked and switched;
- smallest heap: the least -X heapsize in which connect + the whole update succeed (bisected
  by 1 KB), next to the least for connect alone.
None of them may grow with the release's size: the update is bounded by the chunk.
BINARY: a 32-bit unix port (object sizes as on an ESP32), e.g. BUILD/plain32/build/micropython as
bench/heap.py --build-dir BUILD leaves it (a plain port: only its own modules frozen).
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from fleetwire.host.rig import build, micropython  # noqa: E402
from fleetwire.host.brokers.mosquitto import Mosquitto  # noqa: E402
from fleetwire.host.rollout.service import UpdateService  # noqa: E402
from fleetwire.host.rollout.release import Release, pack  # noqa: E402
from fleetwire.host.identity.signing import ReleaseKeys  # noqa: E402

DEVICE = os.path.join(HERE, "ota_heap_device.py")
CHUNKS = (256, 512, 1024, 2048)
SIZES = (16 * 1024, 64 * 1024, 256 * 1024)
FIGURES = ("updater_idle", "held_downloading", "peak", "per_chunk", "per_chunk_updater", "after_switch")
KEYS = None  # the release-signing keys (ReleaseKeys) the offers are signed with, made per run


def release(size, n=[0]):  # noqa: B006 (n counts the releases made)
    n[0] += 1
    return Release.from_bytes(
        pack({"blob.bin": os.urandom(size), ".fwversion": ("9.%d" % n[0]).encode()}), chunk=4096
    )


def run_one(binary, lib, heap, broker, svc, chunk, size, work, mode="peak", connect_only=False):
    dev = "ota-bench-%d" % os.getpid()
    topic_len = len("fleet/%s/ota/chunk" % dev)
    max_packet = chunk + 12 + topic_len + 2 + 2 + 5
    rel = release(size)
    d = tempfile.mkdtemp(dir=work)
    os.mkdir(os.path.join(d, "ota"))
    with open(os.path.join(d, "ota", "keys.json"), "wb") as f:  # as deployed: the key the offer is signed by
        f.write(KEYS.board_file())
    env = dict(os.environ, MICROPYPATH=os.pathsep.join([lib, ".frozen"]))
    p = subprocess.Popen(
        [
            binary,
            "-X",
            "heapsize=" + heap,
            DEVICE,
            dev,
            broker.host,
            str(broker.port),
            str(max_packet),
            "8",
            mode,
        ]
        + (["connect"] if connect_only else []),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=d,
        env=env,
    )
    try:
        seen = []
        while True:
            line = p.stdout.readline()
            seen.append(line)
            if not line or "READY" in line or "CONNECTED" in line:
                break
        if connect_only:
            p.communicate(timeout=60)
            return p.returncode == 0 and "CONNECTED" in line
        if "READY" not in line:
            raise RuntimeError("device: %s%s" % ("".join(seen), p.stdout.read()[-2000:]))
        pools = [int(x.split("n_total_bytes=")[1].split()[0]) for x in seen if "n_total_bytes=" in x]
        svc.offer([dev], rel)
        out, _ = p.communicate(timeout=300)
    finally:
        if p.poll() is None:
            p.kill()
        svc.withdraw([dev])
        shutil.rmtree(d, ignore_errors=True)
    res = [x for x in out.splitlines() if x.startswith("RESULT ")]
    if not res:
        raise RuntimeError("device ended without a result:\n%s" % out[-2000:])
    r = json.loads(res[0][7:])
    assert r["chunk"] == chunk, (r["chunk"], chunk)
    r["qstr_growth"] = pools[1] - pools[0] if len(pools) == 2 else None
    return r


def measure(binary, lib, heap, broker, svc, chunk, size, work):
    r = run_one(binary, lib, heap, broker, svc, chunk, size, work, "peak")
    a = run_one(binary, lib, heap, broker, svc, chunk, size, work, "alloc")
    r["per_chunk"], r["per_chunk_updater"] = a["per_chunk"], a["per_chunk_updater"]
    return r


def smallest(ok, lo=8, hi=256):
    """The least heap in KB for which ok(kb) holds (ok(hi) must)."""
    if not ok(hi):
        return None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi


def fits(binary, lib, broker, svc, chunk, size, work, connect_only=False):
    def ok(kb):
        try:
            r = run_one(binary, lib, "%dK" % kb, broker, svc, chunk, size, work, "alloc", connect_only)
            return bool(r)
        except (RuntimeError, subprocess.TimeoutExpired):
            return False

    return ok


def fmt(v):
    if v is None:
        return "-"
    return "{:,}".format(int(round(v)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--micropython32", help="a 32-bit unix port (see BINARY above)")
    ap.add_argument("--heap", default="256K", help="-X heapsize (default %(default)s)")
    ap.add_argument("--chunks", default=",".join(map(str, CHUNKS)))
    ap.add_argument("--sizes", default=",".join(str(s // 1024) for s in SIZES), help="KB")
    a = ap.parse_args()
    ports = [("64-bit", micropython.binary())]
    if a.micropython32:
        ports.append(("32-bit", a.micropython32))
    chunks = [int(x) for x in a.chunks.split(",")]
    sizes = [int(x) * 1024 for x in a.sizes.split(",")]
    work = tempfile.mkdtemp(prefix="fleetwire-ota-heap-")
    global KEYS
    try:
        build.build(work, mpy=True)
        lib = os.path.join(work, "lib")
        KEYS = ReleaseKeys.create(os.path.join(work, "release"))
        with (
            Mosquitto(max_queued=100000) as broker,
            UpdateService(broker.host, broker.port, watch=False, signer=KEYS.signer()) as svc,
        ):
            rows = []
            t0 = time.time()
            for name, binary in ports:
                for chunk in chunks:
                    for size in sizes:
                        r = measure(binary, lib, a.heap, broker, svc, chunk, size, work)
                        r["smallest"] = smallest(fits(binary, lib, broker, svc, chunk, size, work))
                        r["smallest_connect"] = smallest(
                            fits(binary, lib, broker, svc, chunk, size, work, True)
                        )
                        rows.append((name, chunk, size, r))
                        print(
                            "  %s chunk %d release %d KB: %s"
                            % (name, chunk, size // 1024, {k: r[k] for k in FIGURES}),
                            flush=True,
                        )
        print()
        print("bench/ota_heap.py, -X heapsize=%s, fleetwire from .mpy, %.0f s" % (a.heap, time.time() - t0))
        print()
        print(
            "| port | chunk | release | updater idle (of it, names) | held downloading | peak | per chunk: "
            "all / updater | after switch | smallest heap: update / connect only (KB) |"
        )
        print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for name, chunk, size, r in rows:
            print(
                "| %s | %d | %d KB | %s (%s) | %s | %s | %s / %s | %s | %s / %s |"
                % (
                    name,
                    chunk,
                    size // 1024,
                    fmt(r["updater_idle"]),
                    fmt(r["qstr_growth"]),
                    fmt(r["held_downloading"]),
                    fmt(r["peak"]),
                    fmt(r["per_chunk"]),
                    fmt(r["per_chunk_updater"]),
                    fmt(r["after_switch"]),
                    r["smallest"],
                    r["smallest_connect"],
                )
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

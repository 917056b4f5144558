# A power cut at every flash operation of the command journal (fleetwire.cmd) and of the
# state file (fleetwire.desired), on MicroPython: LittleFS (vfs.VfsLfs2, as on an ESP32) on an
# emulated NOR flash (host/portable/norflash.py). The power fails at flash operation k
# (cleanly, or half-way: a torn program or erase); the board boots from what is on flash, the
# broker redelivers what was not acknowledged (and the retained desired state), and the
# workload finishes. What the world outside the board knows (a handler's effects, the
# answers the broker took, the sections applied) survives the cut.
#
#   micropython cut_program.py cmd|state|full
# Prints "cut k clean|partial ..." per cut and "done <what> ops=N cuts=M ..."; a broken promise
# raises (exit 1). `full`: a long command on a flash with no room for it (no cut).
import gc
import json
import os
import sys

import vfs
from norflash import NorFlash, PowerCut

import fleetwire.cmd as cmd
import fleetwire.desired as desired

MOUNT = "/flash"
N = 5  # commands in the workload
WORK = NorFlash(16)
vfs.VfsLfs2.mkfs(WORK)
PRISTINE = WORK.copy()


def mount(f):
    vfs.mount(vfs.VfsLfs2(f), MOUNT)
    os.chdir(MOUNT)


def unmount():
    os.chdir("/")
    try:
        vfs.umount(MOUNT)
    except Exception:  # a dead flash: the mount goes anyway
        pass


class World:
    """The broker, the handlers' effects and what the operator received."""

    def __init__(self):
        self.ran = [0] * N  # times command k's handler ran
        self.answers = {}  # command id -> every answer the broker took for it
        self.acked = [0] * N  # the command's PUBACK was written (handle() returned)
        self.pid = 0
        self.flight = {}  # answer packet id -> command id (not yet acknowledged)


LONG = 3  # this command is longer than max_packet: it comes in pieces, joined on flash
PIECE = 256


def command(k):
    args = {"n": k, "pad": "p" * 700} if k == LONG else {"n": k}
    return json.dumps({"id": "c%d" % k, "name": "mark", "args": args, "deadline": None}).encode()


def deliver(c, k):
    # as the client hands a message over: a long one in pieces, with the bytes still to come
    m = memoryview(command(k))
    for i in range(0, len(m), PIECE):
        c.handle(c.t_run, m[i : i + PIECE], max(0, len(m) - i - PIECE))


def board(w):
    def send(topic, payload):
        w.pid += 1
        a = json.loads(payload)
        w.answers.setdefault(a["id"], []).append(a)
        w.flight[w.pid] = a["id"]
        return w.pid

    c = cmd.Commands("cut", send, keep=3)

    def mark(args):
        w.ran[args["n"]] += 1
        return args["n"]

    c.on("mark", mark)
    return c


def acks(w, c):
    # the broker acknowledges the answers in flight
    for pid in list(w.flight):
        del w.flight[pid]
        c.delivered(pid)


def cmd_workload(w, c, start=0):
    for k in range(start, N):
        if not w.acked[k]:
            deliver(c, k)
            w.acked[k] = 1
        acks(w, c)
        if k == 2:  # the broker sends one again (a lost PUBACK): it does not run again
            deliver(c, 1)


def cmd_check(w):
    for k in range(N):
        got = w.answers.get("c%d" % k)
        assert got, "command %d never answered" % k
        assert all(a == got[0] for a in got), "command %d answered differently: %s" % (k, got)
        assert w.ran[k] <= 1, "command %d ran %d times" % (k, w.ran[k])
        if got[0]["status"] == "ok":
            assert w.ran[k] == 1, "command %d answered ok and did not run" % k
        else:
            assert got[0]["status"] == "interrupted", got[0]


def cmd_main():
    f = PRISTINE.copy(into=WORK)
    mount(f)
    w = World()
    ops0 = f.ops
    cmd_workload(w, board(w))
    total = f.ops - ops0
    cmd_check(w)
    unmount()
    cuts = again = interrupted = 0
    for k in range(1, total + 1):
        for partial in (False, True):
            f = PRISTINE.copy(into=WORK)
            mount(f)
            w = World()
            f.arm(k, partial, seed=k)
            try:
                cmd_workload(w, board(w))
                raise AssertionError("the workload ended before flash operation %d of %d" % (k, total))
            except (PowerCut, OSError):
                if not f.dead:
                    raise
            unmount()
            gc.collect()
            f.power_on()
            mount(f)
            w.flight = {}  # answers not acknowledged before the cut: the board sends them again
            n = sum(len(v) for v in w.answers.values())
            c = board(w)  # the boot: the journal read back
            c.step()
            again += sum(len(v) for v in w.answers.values()) - n
            acks(w, c)
            first = sum(w.acked)
            for j in range(first, N):  # the broker redelivers what was not acknowledged
                deliver(c, j)
                w.acked[j] = 1
                acks(w, c)
            cmd_check(w)
            interrupted += any(a[0]["status"] == "interrupted" for a in w.answers.values())
            unmount()
            cuts += 1
            print("cut", k, "partial" if partial else "clean", w.ran)
    print("done cmd ops=%d cuts=%d resent=%d interrupted=%d" % (total, cuts, again, interrupted))


VERSIONS = (1, 2, 4, 3, 4, 6)  # as they reach the board: an older one and a repeat among them


def doc(v):
    return json.dumps({"version": v, "state": {"config": {"period_s": v * 10}, "other": v % 2}}).encode()


class SWorld:
    def __init__(self):
        self.applied = []  # (version, period) the config handler was given
        self.retained = None  # the broker's retained desired state


def state(w):
    s = desired.State("cut", lambda t, p: None)

    def config(v):
        w.applied.append((s.doc["version"], v["period_s"]))

    s.on("config", config)
    return s


def state_workload(w, s):
    for v in VERSIONS:
        w.retained = max(w.retained or 0, v)  # the operator's newest is what the broker keeps
        s.handle(s.t_des, doc(v))


def state_check(w, s):
    vs = [v for v, p in w.applied]
    assert vs == sorted(set(vs)), "applied out of order or twice: %s" % vs
    assert s.doc["version"] == 6 and s.get("config") == {"period_s": 60}, s.doc


def state_main():
    f = PRISTINE.copy(into=WORK)
    mount(f)
    w = SWorld()
    ops0 = f.ops
    s = state(w)
    state_workload(w, s)
    total = f.ops - ops0
    state_check(w, s)
    unmount()
    cuts = 0
    kept = {}
    for k in range(1, total + 1):
        for partial in (False, True):
            f = PRISTINE.copy(into=WORK)
            mount(f)
            w = SWorld()
            f.arm(k, partial, seed=k)
            try:
                state_workload(w, state(w))
                raise AssertionError("the workload ended before flash operation %d of %d" % (k, total))
            except (PowerCut, OSError):
                if not f.dead:
                    raise
            unmount()
            gc.collect()
            f.power_on()
            mount(f)
            s = state(w)  # the boot: the applied document read back, never an older one
            at_boot = s.doc["version"]
            assert not w.applied or at_boot >= w.applied[-1][0], (at_boot, w.applied)
            kept[at_boot] = kept.get(at_boot, 0) + 1
            s.handle(s.t_des, doc(w.retained))  # the retained document at the subscribe
            s.handle(s.t_des, doc(6))  # and the rest of the workload
            state_check(w, s)
            unmount()
            cuts += 1
            print("cut", k, "partial" if partial else "clean", at_boot, w.applied)
    print("done state ops=%d cuts=%d boots=%s" % (total, cuts, sorted(kept.items())))


def full_main():
    # a flash with three blocks left: a command longer than that is answered why (its pieces
    # read to the end), and the board goes on
    f = NorFlash(12)
    vfs.VfsLfs2.mkfs(f)
    mount(f)
    with open("filler", "wb") as g:
        st = os.statvfs("/flash")
        g.write(bytearray((st[3] - 3) * st[0]))
    w = World()
    c = board(w)
    m = json.dumps({"id": "big", "name": "mark", "args": {"n": 0, "pad": "p" * 20000}}).encode()
    v = memoryview(m)
    for i in range(0, len(m), PIECE):
        c.handle(c.t_run, v[i : i + PIECE], max(0, len(m) - i - PIECE))
    deliver(c, 1)
    acks(w, c)
    print("answers", json.dumps(w.answers), "ran", w.ran, "left", os.listdir())


{"cmd": cmd_main, "state": state_main, "full": full_main}[sys.argv[1]]()

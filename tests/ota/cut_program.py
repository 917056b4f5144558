# A power cut at every flash operation of an app update, on MicroPython: fleetwire.ota
# downloads a bundle into LittleFS (vfs.VfsLfs2, as on an ESP32) on an emulated NOR flash
# (host/portable/norflash.py), checks it and switches to it. The power fails at flash operation k
# (cleanly, or half-way: a torn program or erase); the board then boots (LittleFS mounted
# again, fleetwire.otaboot.select() as main.py runs it) and must run one whole release, the
# old or the new; then the update resumes from what is on flash and finishes.
#
#   micropython cut_program.py BUNDLE OFFER KEYS [every] [partial]
#   micropython cut_program.py BUNDLE OFFER KEYS keys UPDATE
# OFFER is the signed offer, KEYS the key set the board was deployed with (ota/keys.json).
# Prints one line per cut ("cut k phase resumed_at outcome") and a summary line "done ...";
# any broken promise raises (exit 1). With "keys", the cuts fall in a key update (UPDATE, a
# newer key set signed by a key of KEYS): each boot finds one whole key set, the old or the new.
import json
import os
import sys

import vfs
from norflash import NorFlash, PowerCut

import fleetwire.ota.agent as ota
import fleetwire.otaboot as otaboot
import fleetwire.ota.state as otastate

BUNDLE = open(sys.argv[1], "rb").read()
MAN = open(sys.argv[2], "rb").read()
M = json.loads(json.loads(MAN)["manifest"])
KEYS = open(sys.argv[3], "rb").read()
KEY_UPDATE = sys.argv[4] == "keys" if len(sys.argv) > 4 else False
EVERY = int(sys.argv[4]) if len(sys.argv) > 4 and not KEY_UPDATE else 1
PARTIAL = KEY_UPDATE or (len(sys.argv) > 5 and sys.argv[5] == "partial")
OLD_APP = b"VERSION = '1.0.0'\n"
MOUNT = "/flash"
TAG = bytes(int(M["sha256"][i : i + 2], 16) for i in range(0, 16, 2))


def files_of(bundle):
    import struct

    n = struct.unpack_from("<I", bundle, 4)[0]
    pos, out = 8, {}
    for _ in range(n):
        nl, dl = struct.unpack_from("<HI", bundle, pos)
        pos += 6
        out[bundle[pos : pos + nl].decode()] = bundle[pos + nl : pos + nl + dl]
        pos += nl + dl
    return out


NEW_FILES = files_of(BUNDLE)


def _make():
    f = NorFlash(32)
    vfs.VfsLfs2.mkfs(f)
    vfs.mount(vfs.VfsLfs2(f), MOUNT)
    with open(MOUNT + "/app.py", "wb") as g:  # the deployed app, release 1.0.0
        g.write(OLD_APP)
    os.mkdir(MOUNT + "/ota")
    with open(MOUNT + "/ota/keys.json", "wb") as g:  # and the keys it trusts
        g.write(KEYS)
    vfs.umount(MOUNT)
    return f


PRISTINE = _make()
WORK = NorFlash(32)


def pristine():
    # the board as deployed, in one reused buffer (a new 128 KB one per cut would fragment the heap)
    return PRISTINE.copy(into=WORK)


def mount(f):
    try:
        vfs.umount(MOUNT)
    except OSError:
        pass
    vfs.mount(vfs.VfsLfs2(f), MOUNT)
    os.chdir(MOUNT)


def unmount():
    os.chdir("/")
    try:
        vfs.umount(MOUNT)
    except Exception:  # a dead flash: the mount goes anyway
        pass


class Done(Exception):
    pass


def updater(asks, restarts):
    return ota.Updater(
        "cut",
        lambda t, p: asks.append(bytes(p)),
        kind="esp32",
        running="1.0.0",
        restart=lambda: restarts.append(1),
        max_packet=2048,
        window=2,
    )


def run_update(restarts):
    """Offer the release and serve the board's requests until it restarts into it ->
    (the Updater, the first offset it asked for, or None)"""
    asks = []
    u = updater(asks, restarts)
    u.handle(u.t_offer, MAN)
    first = None
    guard = 0
    while not restarts:
        guard += 1
        if guard > 10000:
            raise AssertionError("the update does not finish")
        if asks:
            r = asks.pop(0)
            o = int.from_bytes(r[8:12], "big")
            c = int.from_bytes(r[12:14], "big")
            k = int.from_bytes(r[14:16], "big")
            if first is None:
                first = o
            for i in range(k):
                p = o + i * c
                if p >= len(BUNDLE):
                    break
                u.handle(u.t_chunk, TAG + p.to_bytes(4, "big") + BUNDLE[p : p + c])
        u.step()
        if not asks and not restarts and not u.verify_due and u.state == ota.DOWNLOADING:
            raise AssertionError("the updater asks for nothing and waits")
        if u.state in (ota.FAILED, ota.REFUSED):
            raise AssertionError("the update failed: %s" % u.reason)
        if u.state == ota.APPLIED and not restarts:
            raise AssertionError("applied without a restart")
        if u.st.get("trial") and not restarts:
            break
    return u, first


def boot_check():
    """Boot as main.py does -> which release runs ("old" or "new"), after checking that
    every file of it is whole."""
    path, mods = list(sys.path), dict(sys.modules)
    st = otaboot.select()
    sys.path[:] = path  # this harness's own path and modules back
    for k, v in mods.items():
        sys.modules[k] = v
    slot = (st or {}).get("app")
    if slot is None:
        with open("app.py", "rb") as g:
            assert g.read() == OLD_APP, "the deployed app was touched"
        return "old"
    d = otastate.slot_dir(slot)
    for name, data in NEW_FILES.items():
        with open(d + "/" + name, "rb") as g:
            assert g.read() == data, "%s/%s is not the release's" % (d, name)
    return "new"


def listing():
    out = []

    def walk(d):
        for e in os.ilistdir(d):
            p = d + "/" + e[0]
            if e[1] == 0x4000:
                walk(p)
            else:
                out.append(p)

    walk(".")
    return out


def one(cut_at, partial):
    f = pristine()
    mount(f)
    restarts = []
    progress = [0]
    f.arm(cut_at, partial, seed=cut_at)
    phase = "done"
    try:
        u, _ = run_update(restarts)
        progress[0] = u.done
    except (PowerCut, OSError):
        if not f.dead:
            raise
        phase = "cut"
    unmount()
    # what the cut left open (the download's file) is gone with the power: collected now, while
    # the flash is dead, so that its finaliser cannot write to the flash after power-on
    import gc

    gc.collect()
    if phase == "done":
        return None  # the whole update ran without reaching op cut_at
    f.power_on()
    mount(f)
    first_boot = boot_check()
    if first_boot == "new":  # the switch was made: the new release is on its trial
        assert otastate.load()["trial"]["boots"] == 1
        unmount()
        return first_boot, "switched"
    # the update goes on from what is on flash
    restarts = []
    u, first = run_update(restarts)
    resumed = first if first is not None else "verify"
    assert boot_check() == "new", "after the update finished the old release still runs"
    unmount()
    return first_boot, resumed


def main():
    f = pristine()
    mount(f)
    restarts = []
    ops0 = f.ops
    run_update(restarts)
    total = f.ops - ops0
    assert boot_check() == "new"
    unmount()
    seen = {"old": 0, "new": 0}
    resumed_mid = 0
    cuts = 0
    for k in range(1, total + 1, EVERY):
        for partial in (False, True) if PARTIAL else (False,):
            r = one(k, partial)
            if r is None:
                continue
            cuts += 1
            seen[r[0]] += 1
            if isinstance(r[1], int) and r[1] > 0:
                resumed_mid += 1
            print("cut", k, "partial" if partial else "clean", r[0], r[1])
    print(
        "done ops=%d cuts=%d old=%d new=%d resumed_mid=%d"
        % (total, cuts, seen["old"], seen["new"], resumed_mid)
    )


def key_set():
    try:
        with open("ota/keys.json") as g:
            return json.load(g)["seq"]
    except OSError:
        return None


def keys_main():
    """A cut at every flash operation of a key update: the board boots with one whole key set,
    the one it had or the new one, and takes the update again if it was the old."""
    update = open(sys.argv[5], "rb").read()
    old = key_set_of(KEYS)
    f = pristine()
    mount(f)
    u = updater([], [])
    ops0 = f.ops
    u.handle(u._prefix + b"keys", update)
    total = f.ops - ops0
    new = key_set()
    assert new > old, (old, new)
    unmount()
    seen = {old: 0, new: 0}
    for k in range(1, total + 1):
        for partial in (False, True):
            f = pristine()
            mount(f)
            u = updater([], [])
            f.arm(k, partial, seed=k)
            try:
                u.handle(u._prefix + b"keys", update)
                raise AssertionError("the update ended before flash operation %d of %d" % (k, total))
            except (PowerCut, OSError):
                if not f.dead:
                    raise
            unmount()
            import gc

            gc.collect()
            f.power_on()
            mount(f)
            got = key_set()  # the file is whole JSON of one set, or the boot says so
            assert got in (old, new), got
            seen[got] += 1
            u = updater([], [])  # the retained update again, at the next connect
            u.handle(u._prefix + b"keys", update)
            assert key_set() == new and u.state != ota.REFUSED, u.reason
            unmount()
            print("cut", k, "partial" if partial else "clean", got)
    print("done keys ops=%d cuts=%d old=%d new=%d" % (total, 2 * total, seen[old], seen[new]))


def key_set_of(data):
    return json.loads(data)["seq"]


keys_main() if KEY_UPDATE else main()

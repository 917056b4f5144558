# A power cut at every flash operation of a certificate switch (fleetwire.tls.renew.take), on
# MicroPython with LittleFS (vfs.VfsLfs2, as on an ESP32) on an emulated NOR flash
# (host/portable/norflash.py). The power fails at flash operation k (cleanly, or half-way: a
# torn program or erase); the board then boots: LittleFS mounted again, and
# fleetwire.tls.watch.settle() as the runner calls it before the identity loads. The board
# must then hold one whole certificate, the old or the new, and connect with it to the broker
# (a real mosquitto with mutual TLS); with the old one it takes the renewal again.
#
#   micropython cert_cut_program.py OLD.der NEW.der KEY.der CA.der HOST PORT DEVICE_ID
# Prints one line per cut ("cut k clean|partial old|new") and "done ops=N cuts=C old=O new=W";
# any broken promise raises (exit 1).
import gc
import os
import sys

import vfs
from norflash import NorFlash, PowerCut

from fleetwire import MQTTClient
from fleetwire.identity import Context
from fleetwire.tls import renew, watch


def _read(p):
    with open(p, "rb") as f:
        return f.read()


OLD, NEW, KEY, CA = (_read(p) for p in sys.argv[1:5])
HOST, PORT, ME = sys.argv[5], int(sys.argv[6]), sys.argv[7]
MOUNT = "/flash"
P = MOUNT + "/tls/cert.der"
CFG = {
    "device_id": ME,
    "broker": HOST,
    "port": PORT,
    "tls_ca": MOUNT + "/tls/ca.der",
    "tls_cert": P,
    "tls_key": MOUNT + "/tls/key.der",
}


class Client:
    # the board's client as the switch sees it: the test connection with the new certificate
    # succeeds (a connection is no flash operation: test_renewal.py tries real ones)
    rest = 0

    def __init__(self):
        self.ssl = None
        self.sent = []

    def disconnect(self):
        pass

    def connect(self, clean_session=True):
        return 0

    def publish(self, topic, msg, retain=False, qos=0, block=True):
        self.sent.append(msg)


class Board:
    # what fleetwire.tls.watch.Watch holds, without its subscription
    def __init__(self):
        self.c = Client()
        self.cfg = CFG
        self.pre = ("fleet/%s/cert/" % ME).encode()
        self.tell = watch.has(P + ".old")
        self.due = self.asked = None


def mount(f):
    try:
        vfs.umount(MOUNT)
    except OSError:
        pass
    vfs.mount(vfs.VfsLfs2(f), MOUNT)


def unmount():
    try:
        vfs.umount(MOUNT)
    except OSError:
        pass


def _make():
    f = NorFlash(16)
    vfs.VfsLfs2.mkfs(f)
    mount(f)
    os.mkdir(MOUNT + "/tls")
    for name, data in (("cert.der", OLD), ("key.der", KEY), ("ca.der", CA)):
        with open(MOUNT + "/tls/" + name, "wb") as g:
            g.write(data)
    unmount()
    return f


PRISTINE = _make()
WORK = NorFlash(16)


def connects():
    # the identity the board boots with works: the broker takes it
    c = MQTTClient(ME + "-cut", HOST, PORT, ssl=Context(CFG), timeout=10)
    c.connect()
    c.disconnect()


def leftovers():
    return sorted(n for n in os.listdir(MOUNT + "/tls") if n.endswith((".new", ".old")))


def main():
    f = PRISTINE.copy(into=WORK)
    mount(f)
    ops0 = f.ops
    renew.take(Board(), NEW)
    total = f.ops - ops0
    assert _read(P) == NEW and leftovers() == [], leftovers()
    unmount()
    seen = {"old": 0, "new": 0}
    for k in range(1, total + 1):
        for partial in (False, True):
            f = PRISTINE.copy(into=WORK)
            mount(f)
            f.arm(k, partial, seed=k)
            try:
                renew.take(Board(), NEW)
                raise AssertionError("the switch ended before flash operation %d of %d" % (k, total))
            except (PowerCut, OSError):
                if not f.dead:
                    raise
            unmount()
            gc.collect()  # a file the cut left open is finalized now, on the dead flash
            f.power_on()
            mount(f)  # the boot
            watch.settle(P)
            got = _read(P)
            assert got in (OLD, NEW), "cut %d: tls/cert.der is neither certificate" % k
            which = "new" if got == NEW else "old"
            left = leftovers()
            # switched and not yet told keeps cert.der.old (Watch tells the issuer); else nothing
            assert left == ([] if which == "old" else left) and set(left) <= {"cert.der.old"}, (k, left)
            connects()
            b = Board()
            if which == "old":
                renew.take(b, NEW)  # the renewal, again: it goes through
            else:
                renew.run(b, None)  # the boot's Watch: tells the issuer what it switched from
            assert _read(P) == NEW and leftovers() == [], (k, leftovers())
            if which == "new" and left:
                assert b.c.sent and b.c.sent[-1].startswith("ok "), b.c.sent
            seen[which] += 1
            unmount()
            print("cut", k, "partial" if partial else "clean", which)
    print("done ops=%d cuts=%d old=%d new=%d" % (total, 2 * total, seen["old"], seen["new"]))


main()

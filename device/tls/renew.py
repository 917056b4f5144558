# A certificate renewed over the air, the work (fleetwire.tls.watch loads this module when
# there is some, and drops it after): ask the issuer, take its answer, try the new
# certificate in a connection of the client's own, switch the files, tell the issuer.
#
# The board keeps its key: MicroPython can neither make a key nor sign with the one its TLS
# context holds (its tls module has no key generation, no CSR, no signing call; cryptolib is
# AES only), so it cannot build a CSR. It sends its current certificate instead, under its
# current identity, on the one topic the broker lets only it publish; the issuer certifies the
# same public key again (fleetwire.host.identity.issuer says why that is enough).
#
# The try is the client's own reconnection with the new certificate (a second TLS session would
# need another 26-28 KB): DISCONNECT, connect with it, and on a refusal connect again with the
# old one. Messages wait in the store meanwhile, as in any reconnection.
import os

try:
    from time import ticks_ms
except ImportError:
    from ..cpython import ticks_ms

from .. import identity
from .check import info
from .watch import due


def run(w, m):
    if m is None:
        tell(w)
    elif m == b"":
        ask(w)
    else:
        t, msg = m
        k = t[len(w.pre) :]
        if msg is None:
            print("renew: a message on %s longer than max_packet: left" % t.decode())
        elif k == b"new":
            take(w, msg)
        elif k == b"refused":
            print("renew: the issuer refused:", msg.decode())
        elif k == b"renew":
            print("renew: ordered by the operator")
            ask(w)


def ask(w):
    p = w.cfg["tls_cert"]
    with open(p, "rb") as f:
        der = f.read()
    w.c.publish(_topic(w, "cert_req"), der, False, 1, block=False)
    w.asked = ticks_ms()
    c = info(p)
    print(
        "renew: asked for a new certificate (serial %s, valid until %s)" % ((c[0], c[3][:8]) if c else "??")
    )


def take(w, der):
    cfg = w.cfg
    p = cfg["tls_cert"]
    n = p + ".new"
    with open(n, "wb") as f:
        f.write(der)
    new, old = info(n), info(p)
    why = None
    if new is None:
        why = "not a DER certificate"
    elif old is not None and new[4] != old[4]:
        why = "its subject is not this board's"
    elif old is not None and new[0] == old[0]:
        why = "the certificate this board has"
    c = w.c
    was = c.ssl
    if why is None:
        c.disconnect()
        c.ssl = identity.Context(dict(cfg, tls_cert=n))
        try:
            c.connect(False)
        except Exception as e:  # noqa: BLE001 - a refusal, a timeout: the old certificate stays
            why = "the test connection failed: %s: %s" % (type(e).__name__, e)
            c.ssl = was
            try:
                c.connect(False)
            except Exception as e:  # noqa: BLE001 - the client's reconnection goes on trying
                print("renew: not connected again:", e)
    if why is not None:
        os.remove(n)
        print("renew: kept the old certificate: the new one (serial %s):" % (new[0] if new else "?"), why)
        if new is not None:
            c.publish(_topic(w, "cert_ok"), "bad %s %s" % (new[0], why[:160]), False, 1, block=False)
        return
    # tried and good: the switch (settle() finishes it after a power cut)
    os.rename(p, p + ".old")
    os.rename(n, p)
    c.ssl.cfg = cfg  # its refusals read the files by cfg's names
    print("renew: switched to the new certificate (serial %s, valid until %s)" % (new[0], new[3][:8]))
    tell(w)
    w.due = due(cfg)


def tell(w):
    # "ok NEW OLD": the issuer revokes OLD. Queued (the store keeps it) before P.old goes:
    # a power cut between the two tells it again at the next boot, which the issuer ignores
    p = w.cfg["tls_cert"]
    new, old = info(p), info(p + ".old")
    if new and old:
        w.c.publish(_topic(w, "cert_ok"), "ok %s %s" % (new[0], old[0]), False, 1, block=False)
    try:
        os.remove(p + ".old")
    except OSError:  # told already
        pass
    w.tell = False


def _topic(w, name):
    return "fleet/%s/%s" % (w.cfg["device_id"], name)

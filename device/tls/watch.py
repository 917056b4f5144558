# Certificates renewed over the air, the part a board holds: loaded by fleetwire.runner when
# config.json has cert_renew_days (and a tls_cert). It settles a switch a power cut left half
# done (at boot, before the identity loads), takes the messages of fleet/<id>/cert/# and,
# from the main loop, says when the work is due: fleetwire.tls.renew does it, loaded for the
# moment and dropped again (the issuer's side: fleetwire.host.identity.issuer).
#
# The switch, file by file (P is tls_cert): the new certificate is written to P.new and tried
# in a connection; only then P -> P.old, P.new -> P (renames are atomic on LittleFS), the issuer
# is told (it revokes the old one) and P.old removed. So at boot:
#   P and P.old      switched, the issuer maybe not told: Watch tells it
#   P.old, no P      cut between the renames: P.new was tried and whole -> P (else P.old -> P)
#   P (and P.new)    not switched: P.new (written or tried only in part) goes
import os
import time

try:
    from time import ticks_ms, ticks_diff
except ImportError:
    from ..cpython import ticks_ms, ticks_diff


def has(p):
    try:
        os.stat(p)
        return True
    except OSError:
        return False


def settle(p):
    """At boot: whatever a power cut interrupted, leave one whole certificate in p."""
    if has(p):
        if not has(p + ".old") and has(p + ".new"):
            os.remove(p + ".new")
    elif has(p + ".old"):
        os.rename(p + ".new" if has(p + ".new") else p + ".old", p)


def _at(b, i):
    # (start, end) of the value of the DER element at i
    n = b[i + 1]
    i += 2
    if n & 0x80:
        k = n & 0x7F
        n = int.from_bytes(b[i : i + k], "big")
        i += k
    return i, i + n


def due(cfg):
    """When to ask: cert_renew_days before tls_cert's notAfter, on time.time()'s scale (the
    board's clock: an unset one is years early, so it asks only when ordered); None when the
    certificate cannot be read. Read here, not with fleetwire.tls.check: a board that has
    nothing to renew loads none of the work's names."""
    try:
        with open(cfg["tls_cert"], "rb") as f:
            b = f.read()
        i = _at(b, _at(b, 0)[0])[0]  # TBSCertificate's first element
        if b[i] == 0xA0:  # [0] version
            i = _at(b, i)[1]
        for _ in range(3):  # serial, signature algorithm, issuer
            i = _at(b, i)[1]
        i = _at(b, _at(b, i)[0])[1]  # validity: past notBefore
        s, e = _at(b, i)
        t = bytes(b[s:e]).decode()
        if b[i] == 0x17:  # UTCTime YYMMDDHHMMSSZ
            t = ("20" if int(t[:2]) < 50 else "19") + t
        t = tuple(int(t[k : k + 2 if k else 4]) for k in (0, 4, 6, 8, 10, 12)) + (0, 0, 0)
    except (OSError, ValueError, IndexError):
        return None
    try:
        from calendar import timegm  # CPython: time.mktime would read the tuple as local time
    except ImportError:
        timegm = time.mktime  # MicroPython's is UTC
    return timegm(t) - cfg.get("cert_renew_days", 30) * 86400


class Watch:
    """Watch(client, cfg, callback=None): subscribes to fleet/<id>/cert/# (QoS 1) and hands the
    other messages to callback (the program's own); call step() from the main loop."""

    def __init__(self, client, cfg, callback=None):
        self.c = client
        self.cfg = cfg
        self.cb = callback
        self.pre = ("fleet/%s/cert/" % cfg["device_id"]).encode()
        self.msg = None  # (topic, message) taken by step()
        self.cut = False  # a piece of a longer message came last
        self.due = due(cfg)  # time.time() from which to ask
        self.asked = None  # ticks_ms() of the last request
        self.tell = has(cfg["tls_cert"] + ".old")  # switched: the issuer must hear of it
        client.set_callback(self.on)
        client.subscribe(self.pre + b"#", 1)

    def on(self, topic, msg):
        if topic.startswith(self.pre):
            # a message longer than max_packet comes in pieces: it is refused (msg None) whole
            cut = self.c.rest or self.cut
            self.cut = self.c.rest != 0
            self.msg = (bytes(topic), None if cut else bytes(msg))
        elif self.cb is not None:
            self.cb(topic, msg)

    def step(self):
        if self.tell:  # first: a switch would otherwise rename over the old file not told of
            return self.run(None)
        m = self.msg
        if m is not None:
            self.msg = None
            self.run(m)
        elif self.due is not None and time.time() >= self.due:
            a = self.asked
            if a is None or ticks_diff(ticks_ms(), a) > self.cfg.get("cert_retry_s", 3600) * 1000:
                self.run(b"")

    def run(self, m):
        # None: tell the issuer of a switch; b"": ask; (topic, message): one of fleet/<id>/cert/#
        from .. import identity

        try:
            identity.load("tls.renew").run(self, m)
        except Exception as e:  # noqa: BLE001 - the board runs on with the certificate it has
            print("renew: not done:", type(e).__name__, e)
            self.tell = False  # the next boot tells again (the old file is still there)
            self.asked = ticks_ms()  # and a request waits for cert_retry_s
        finally:
            identity.drop("tls.renew")
            identity.drop("tls.check")

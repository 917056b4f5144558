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


class Watch:
    """Watch(client, cfg, callback=None): subscribes to fleet/<id>/cert/# (QoS 1) and hands the
    other messages to callback (the program's own); call step() from the main loop."""

    def __init__(self, client, cfg, callback=None):
        self.c = client
        self.cfg = cfg
        self.cb = callback
        self.pre = ("fleet/%s/cert/" % cfg["device_id"]).encode()
        self.msg = None  # (topic, message) taken by step()
        self.due = None  # time.time() from which to ask, set by fleetwire.tls.renew
        self.asked = None  # ticks_ms() of the last request
        self.tell = has(cfg["tls_cert"] + ".old")  # switched: the issuer must hear of it
        client.set_callback(self.on)
        client.subscribe(self.pre + b"#", 1)
        self.run(None)  # when the certificate is due for renewal

    def on(self, topic, msg):
        if topic.startswith(self.pre):
            self.msg = (bytes(topic), bytes(msg)) if not self.c.rest else (topic, None)
        elif self.cb is not None:
            self.cb(topic, msg)

    def step(self):
        m = self.msg
        if m is not None or self.tell:
            self.msg = None
            self.run(m)
        elif self.due is not None and time.time() >= self.due:
            a = self.asked
            if a is None or ticks_diff(ticks_ms(), a) > self.cfg.get("cert_retry_s", 3600) * 1000:
                self.run(b"")

    def run(self, m):
        # None: plan (and tell); b"": ask; (topic, message): one of fleet/<id>/cert/#
        from .. import identity

        try:
            identity.load("tls.renew").run(self, m)
        finally:
            identity.drop("tls.renew")
            identity.drop("tls.check")

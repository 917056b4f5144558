"""Board certificates renewed over the air: the fleet CA's side (`fleetwire ca serve`).

A board with "cert_renew_days" in its config.json asks for a new certificate that many days
before its own expires, or when the operator orders it (`fleetwire ca order`, a message on
fleet/<id>/cert/renew). The exchange, on topics the broker's ACL gives each party
(fleetwire.host.identity.brokerconf):

    board -> issuer   fleet/<id>/cert_req   its current certificate (DER)
    issuer -> board   fleet/<id>/cert/new   the new certificate (DER), or
                      fleet/<id>/cert/refused   why not (text)
    board -> issuer   fleet/<id>/cert_ok    "ok NEW OLD" once it switched to NEW (serials in
                                            hex): OLD is revoked; "bad NEW reason" when its
                                            test connection with NEW failed: NEW is revoked

The request is not a CSR, and needs no signature: the board keeps its key (MicroPython can
neither make a key nor sign with the one its TLS context holds, so it cannot build a CSR),
and the new certificate certifies the very public key this CA already certified for that
device_id. A forged request could only get a certificate for a key the forger does not hold.
What the issuer checks (policy, each refusal with its reason): the certificate in the
request is this CA's, current (in its index, not revoked, not expired), a board's, and its
CN is the device_id of the topic it came on, which the broker lets only that board publish
(mutual TLS, the CN as user name, the ACL). The new certificate has the same CN and key, a
new serial, and a validity of at most pki.LEAF_DAYS, never past the CA's own.
"""

import datetime
import threading

from cryptography import x509

from fleetwire.host.identity import pki
from fleetwire.host.identity.brokerconf import CERT, CERT_OK, CERT_REQ
from fleetwire.host.identity.login import Subscriber, connect_and_wait, disconnect, paho_client


class Refused(pki.PKIError):
    """A renewal request or a report the policy refuses; the text says why."""


def _entry(ca, serial):
    for e in ca.index():
        if e["serial"] == serial:
            return e
    return None


def renew(ca, device_id, der, days=pki.LEAF_DAYS):
    """The request `der` (a board's current certificate) that came on fleet/<device_id>/cert_req
    -> a new certificate for the same key, recorded in the CA's index. Raises Refused."""
    if not 1 <= days <= pki.LEAF_DAYS:
        raise Refused("a renewed certificate is valid 1 to %d days, not %d" % (pki.LEAF_DAYS, days))
    role = ca.role_of(device_id)
    if role not in (None, "device"):
        raise Refused("%r is the name of this CA's %s identity, not a board's" % (device_id, role))
    try:
        old = x509.load_der_x509_certificate(bytes(der))
    except ValueError:
        raise Refused("the request from %s is not a DER certificate (%d bytes)" % (device_id, len(der)))
    cn = pki.common_name(old)
    if cn != device_id:
        raise Refused(
            "the request on fleet/%s/cert_req carries the certificate of %r: a board renews only its own"
            % (device_id, cn)
        )
    if not pki.signed_by(old, ca.cert):
        raise Refused(
            "%s's certificate (serial %s) was not issued by this CA (%s) but by %s"
            % (device_id, pki.serial_hex(old), ca.name, old.issuer.rfc4514_string())
        )
    e = ca.lookup(old)
    if e is None:
        raise Refused(
            "%s's certificate (serial %s) is not in this CA's index" % (device_id, pki.serial_hex(old))
        )
    if e["role"] != "device":
        raise Refused("certificate serial %s is a %s's, not a board's" % (e["serial"], e["role"]))
    if e.get("revoked"):
        raise Refused(
            "%s's certificate (serial %s) was revoked on %s: a revoked board gets a new one only by "
            "a deploy (fleetwire deploy --ca DIR --rotate)" % (device_id, e["serial"], e["revoked"][:10])
        )
    now = datetime.datetime.now(datetime.timezone.utc)
    if pki.not_after(old) < now:
        raise Refused("%s's certificate (serial %s) has expired" % (device_id, e["serial"]))
    left = (pki.not_after(ca.cert) - now).days
    if left < 1:
        raise Refused("the fleet CA itself expires within a day: make a new one (fleetwire ca init)")
    cert = pki.sign(ca.key, ca.cert, device_id, old.public_key(), "device", days=min(days, left))
    ca.record(pki.Issued(None, cert, "device"))
    return cert


def report(ca, device_id, text):
    """A board's report on fleet/<device_id>/cert_ok -> the index entries revoked (none when
    there was nothing left to revoke: a report told twice). Raises Refused."""
    w = text.split()
    if len(w) < 2 or w[0] not in ("ok", "bad") or (w[0] == "ok" and len(w) != 3):
        raise Refused("%s's report %r is not 'ok NEW OLD' or 'bad NEW REASON'" % (device_id, text[:80]))
    try:  # the board writes a serial's bytes in hex (a leading 0 kept), the index as a number
        n = 3 if w[0] == "ok" else 2
        w[1:n] = ["%x" % int(x, 16) for x in w[1:n]]
    except ValueError:
        raise Refused("%s's report %r: a serial is not hexadecimal" % (device_id, text[:80]))
    new = _entry(ca, w[1])
    if new is None or new["name"] != device_id:
        raise Refused("%s reported serial %s, which this CA never issued to it" % (device_id, w[1]))
    # ok: the board runs NEW, so OLD goes; bad: the board threw NEW away, so NEW goes
    serial = w[2] if w[0] == "ok" else w[1]
    e = _entry(ca, serial)
    if e is None or e["name"] != device_id:
        raise Refused("%s reported serial %s, which this CA never issued to it" % (device_id, serial))
    if e.get("revoked") or (w[0] == "ok" and serial == w[1]):
        return []
    return ca.revoke(serial=serial)


def order(device_ids, host, port, tls_ca=None, tls_cert=None, tls_key=None, timeout=10):
    """Tell boards to renew now: fleet/<id>/cert/renew (QoS 1, not retained: a board away
    gets it at its next connection, from its session), published as the operator."""
    ids = [pki.check_name(d, "device id") for d in device_ids]
    up = threading.Event()
    c = paho_client("fleetwire-order", True, tls=(tls_ca, tls_cert, tls_key))
    c.on_connect = lambda client, u, flags, rc, props: up.set() if rc == 0 else None
    try:
        c.connect(host, port, keepalive=30)
    except OSError as e:
        raise pki.PKIError("broker %s:%d: cannot reach it: %s" % (host, port, e))
    c.loop_start()
    try:
        if not up.wait(timeout):
            raise pki.PKIError("broker %s:%d: no CONNACK within %s s" % (host, port, timeout))
        for d in ids:
            c.publish(CERT % d + "renew", b"", qos=1).wait_for_publish(timeout)
    finally:
        disconnect(c)
    return ids


class IssuerService(Subscriber):
    """IssuerService(ca, host, port, tls_ca, tls_cert, tls_key, days=pki.LEAF_DAYS,
    on_revoke=None, client_id="fleetwire-issuer", log=print).

    Logged in as the operator (it publishes on fleet/+/cert/#), it answers the boards'
    requests within policy (renew(), report()); on_revoke() is called after each revocation
    (the CRL is rewritten: the broker must read it, e.g. by SIGHUP). order(ids) asks boards
    to renew now (as order() does). events: [(what, device_id, detail)], what in "issued", "refused",
    "revoked", "kept" (a report told again); wait(cond) waits for cond(events)."""

    def __init__(
        self,
        ca,
        host,
        port,
        tls_ca=None,
        tls_cert=None,
        tls_key=None,
        days=pki.LEAF_DAYS,
        on_revoke=None,
        client_id="fleetwire-issuer",
        log=print,
    ):
        if not 1 <= days <= pki.LEAF_DAYS:
            raise Refused("--days: 1 to %d, not %d" % (pki.LEAF_DAYS, days))
        self.ca, self.host, self.port = ca, host, port
        self.tls = (tls_ca, tls_cert, tls_key)
        self.days = days
        self.on_revoke = on_revoke
        self.client_id = client_id
        self.log = log
        self.events = []
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._client = None
        self.answered = threading.Event()
        self.connected = False
        self.error = None

    def start(self, timeout=10):
        # a session the broker keeps: requests made while the issuer is away wait for it
        c = paho_client(self.client_id, False, tls=self.tls)
        c.on_connect = self._on_connect
        c.on_message = self._on_message
        c.on_subscribe = self._on_subscribe
        self._client = c
        why = connect_and_wait(c, self.host, self.port, self.answered, lambda: self.error, timeout)
        if why:
            self.stop()
            raise pki.PKIError("broker %s:%d: %s" % (self.host, self.port, why))
        return self

    def stop(self):
        c, self._client = self._client, None
        disconnect(c)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def subscriptions(self):
        return [(CERT_REQ % "+", 1), (CERT_OK % "+", 1)]

    def order(self, device_ids):
        """Ask boards to renew now (fleet/<id>/cert/renew, QoS 1)."""
        for d in device_ids:
            pki.check_name(d, "device id")
            self._client.publish(CERT % d + "renew", b"", qos=1).wait_for_publish(10)

    def wait(self, cond, timeout=60):
        with self._changed:
            if not self._changed.wait_for(lambda: cond(self.events), timeout):
                raise TimeoutError("issuer: not within %s s; events: %s" % (timeout, self.events))
            return list(self.events)

    def _event(self, what, device_id, detail):
        self.log("issuer: %s %s: %s" % (what, device_id, detail))
        with self._changed:
            self.events.append((what, device_id, detail))
            self._changed.notify_all()

    def _on_message(self, client, userdata, m):
        parts = m.topic.split("/")
        if len(parts) != 3 or parts[0] != "fleet":
            return
        device_id = parts[1]
        try:
            if "fleet/%s/%s" % (device_id, parts[2]) == CERT_REQ % device_id:
                cert = renew(self.ca, device_id, m.payload, self.days)
                client.publish(CERT % device_id + "new", pki.der(cert), qos=1)
                self._event(
                    "issued",
                    device_id,
                    "serial %s, valid until %s"
                    % (pki.serial_hex(cert), pki.not_after(cert).strftime("%Y-%m-%d")),
                )
            elif "fleet/%s/%s" % (device_id, parts[2]) == CERT_OK % device_id:
                text = m.payload.decode("ascii", "replace")
                hit = report(self.ca, device_id, text)
                if hit and self.on_revoke is not None:
                    self.on_revoke()  # first: "revoked" means the broker refuses it
                for e in hit:
                    self._event("revoked", device_id, "serial %s (%s)" % (e["serial"], text.split()[0]))
                if not hit:
                    self._event("kept", device_id, text)
        except pki.PKIError as e:  # Refused, or a CA that cannot be read: the board is told why
            if parts[2] == "cert_req":
                client.publish(CERT % device_id + "refused", str(e).encode(), qos=1)
            self._event("refused", device_id, str(e))

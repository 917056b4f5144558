"""A board's TLS identity at deploy time: which files `fleetwire deploy` writes to the board
(the broker's CA, the board's certificate and its key, in tls/) and what config.json says
about them. Everything given is checked here, before anything touches the board.

With a fleet CA (--ca DIR) the board gets a key and a certificate whose CN is its
device_id. The key is made in memory, written to the board once and never kept on the
host; a later deploy keeps both (it reads back only the certificate, which is public)
unless --rotate is given or the certificate cannot serve any more (missing, expiring
within pki.RENEW_DAYS, another device's, another CA's). A revoked certificate is replaced
only with --rotate: a revocation is a decision, undoing it must be one too. A replaced
certificate of this CA is revoked, since its key is gone from the board.

With --cert/--key (a certificate issued elsewhere, e.g. by AWS IoT) those are installed
as they are; --broker-ca is the CA of the broker's certificate (the fleet CA by default).
"""

import datetime
import os

from cryptography import x509

from fleetwire.host.identity import pki

CA = "tls/ca.der"
CERT = "tls/cert.der"
KEY = "tls/key.der"
ISSUER = "tls/issuer.der"

# Runs on the board after the hash listing: the certificate (public) as hex, and whether a
# key is there -- the key itself is never read.
BOARD_QUERY = """
import binascii
try:
    with open(%(cert)r, "rb") as _f:
        print("CERT", binascii.hexlify(_f.read()).decode())
except OSError:
    print("CERT -")
try:
    import os
    os.stat(%(key)r)
    print("KEY yes")
except OSError:
    print("KEY no")
""" % {"cert": CERT, "key": KEY}


def parse_query(lines):
    """The board's answer to BOARD_QUERY -> (certificate or None, key present)."""
    cert, key = None, False
    for line in lines:
        w = line.split()
        if len(w) == 2 and w[0] == "CERT" and w[1] != "-":
            try:
                cert = x509.load_der_x509_certificate(bytes.fromhex(w[1]))
            except ValueError:
                cert = None  # unreadable: treated as none, a new one is issued
        elif len(w) == 2 and w[0] == "KEY":
            key = w[1] == "yes"
    return cert, key


class Plan:
    """The identity to deploy, checked. decide() looks at what the board has; files() and
    config() say what to write; commit() records it in the CA once written."""

    def __init__(self, device_id, ca=None, cert=None, key=None, broker_ca=None, rotate=False):
        self.device_id = device_id
        self.ca = ca
        self.cert, self.key = cert, key
        self.broker_ca = broker_ca
        self.rotate = rotate
        self.action = None  # "issued", "kept", "installed"
        self.reason = ""
        self.issued = None  # pki.Issued when a new pair was made
        self.superseded = None  # the board's certificate a new one replaces
        self.board_cert = None

    # ---- what the board has, and what to do about it

    def decide(self, board_cert, key_present):
        self.board_cert = board_cert
        if self.cert is not None:  # installed as given
            if (
                board_cert is not None
                and key_present
                and pki.der(board_cert) == pki.der(self.cert)
                and not self.rotate
            ):
                self.action, self.reason = "kept", "the board already holds this certificate"
            else:
                self.action, self.reason = "installed", "the certificate given with --cert"
            return self.action
        why = self._why_new(board_cert, key_present)
        if why is None:
            self.action, self.reason = "kept", "still good (--rotate replaces it)"
            return self.action
        self.issued = self.ca.issue(self.device_id, "device", record=False)
        self.action, self.reason = "issued", why
        if (
            board_cert is not None
            and pki.signed_by(board_cert, self.ca.cert)
            and not self.ca.revoked(board_cert)
        ):
            self.superseded = board_cert
        return self.action

    def _why_new(self, c, key_present):
        if self.rotate:
            return "rotated on request (--rotate)"
        if c is None:
            return "the board had no certificate"
        if not key_present:
            return "the board had a certificate but no key"
        if pki.common_name(c) != self.device_id:
            return "the board's certificate was for %r" % pki.common_name(c)
        if not pki.signed_by(c, self.ca.cert):
            return "the board's certificate was issued by another CA (%s)" % c.issuer.rfc4514_string()
        if self.ca.revoked(c):
            raise pki.PKIError(
                "%s's certificate (serial %s) is revoked; --rotate gives the board a new one"
                % (self.device_id, pki.serial_hex(c))
            )
        left = pki.not_after(c) - datetime.datetime.now(datetime.timezone.utc)
        if left < datetime.timedelta(days=pki.RENEW_DAYS):
            return "the board's certificate %s on %s" % (
                "expired" if left.total_seconds() < 0 else "expires",
                _day(pki.not_after(c)),
            )
        return None

    # ---- what to write

    def broker_ca_cert(self):
        return self.broker_ca if self.broker_ca is not None else self.ca.cert

    def files(self, tmp):
        """{board path: local file} for the identity (tls/ca.der always; the certificate and
        the key only when new; tls/issuer.der when board certificates have their own CA)."""
        out = {CA: _put(tmp, "ca.der", pki.der(self.broker_ca_cert()))}
        issuer = self._issuer()
        if issuer is not None:
            out[ISSUER] = _put(tmp, "issuer.der", pki.der(issuer))
        if self.action == "issued":
            out[CERT] = _put(tmp, "cert.der", pki.der(self.issued.cert))
            out[KEY] = _put(tmp, "key.der", pki.key_der(self.issued.key), private=True)
        elif self.action == "installed":
            out[CERT] = _put(tmp, "cert.der", pki.der(self.cert))
            out[KEY] = _put(tmp, "key.der", pki.key_der(self.key), private=True)
        return out

    def _issuer(self):
        # The CA the broker accepts board certificates from, when it is not the broker's own
        # CA: the board names it when it is refused (fleetwire.tls.errors).
        if self.ca is not None and pki.der(self.broker_ca_cert()) != pki.der(self.ca.cert):
            return self.ca.cert
        return None

    def config(self, cfg):
        cfg = dict(cfg, tls_ca=CA, tls_cert=CERT, tls_key=KEY)
        cfg.pop("tls_issuer", None)
        if self._issuer() is not None:
            cfg["tls_issuer"] = ISSUER
        elif self.cert is not None and not pki.signed_by(self.cert, self.broker_ca_cert()):
            cfg["tls_issuer"] = ""  # its CA is not known to the board: it cannot tell "another CA"
        return cfg

    def commit(self):
        """After the board has the files: record the new certificate, revoke the one it replaced
        -> the revoked certificate's serial, or None."""
        if self.issued is None:
            return None
        self.ca.record(self.issued)
        if self.superseded is not None:
            self.ca.revoke(serial=pki.serial_hex(self.superseded))
            return pki.serial_hex(self.superseded)
        return None

    def describe(self):
        c = self.issued.cert if self.issued else (self.cert if self.cert is not None else self.board_cert)
        return "%s %s certificate (CN %s, serial %s, valid until %s): %s" % (
            self.action,
            self.device_id + "'s" if self.action != "installed" else "the",
            pki.common_name(c),
            pki.serial_hex(c),
            _day(pki.not_after(c)),
            self.reason,
        )


def prepare(cfg, ca_dir=None, cert=None, key=None, broker_ca=None, rotate=False):
    """Check the identity options for config `cfg` -> a Plan, or None without any. Raises
    pki.PKIError with the reason; touches no board."""
    if not (ca_dir or cert or key or broker_ca):
        if rotate:
            raise pki.PKIError("--rotate needs the fleet CA that issues the new certificate: --ca DIR")
        return None
    device_id = cfg["device_id"]
    ca = the_cert = the_key = the_broker_ca = None
    if ca_dir:
        ca = pki.FleetCA(ca_dir)
        pki.check_name(device_id, "device_id")
        role = ca.role_of(device_id)
        if role not in (None, "device"):
            raise pki.PKIError(
                "device_id %r is the name of this CA's %s identity: a board with that name would "
                "get its rights at the broker; choose another device_id" % (device_id, role)
            )
    if cert or key:
        if not (cert and key):
            raise pki.PKIError("--cert and --key go together (the board needs both)")
        if ca is not None:
            raise pki.PKIError(
                "--cert/--key install a certificate issued elsewhere; --ca issues one: give one or the other"
            )
        the_cert = pki.load_certificate(cert, "--cert")
        the_key = pki.load_private_key(key, "--key")
        pki.check_pair(the_cert, the_key, "--cert %s" % cert)
        if pki.is_ca(the_cert):
            raise pki.PKIError(
                "--cert %s is a CA certificate; the board needs its own (leaf) certificate" % cert
            )
        if not hasattr(the_key, "curve") and the_key.key_size < 2048:
            raise pki.PKIError(
                "--key %s is a %d-bit RSA key: too weak for any broker" % (key, the_key.key_size)
            )
    if broker_ca:
        the_broker_ca = pki.load_certificate(broker_ca, "--broker-ca")
        pki.check_ca(the_broker_ca, "--broker-ca %s" % broker_ca)
    elif ca is None:
        raise pki.PKIError(
            "the board must check the broker's certificate: give the CA that signed it with "
            "--broker-ca FILE (e.g. AmazonRootCA1.pem for AWS IoT Core)"
        )
    if rotate and ca is None:
        raise pki.PKIError("--rotate needs the fleet CA that issues the new certificate: --ca DIR")
    return Plan(device_id, ca, the_cert, the_key, the_broker_ca, rotate)


def _put(tmp, name, data, private=False):
    path = os.path.join(tmp, name)
    if private:
        pki.write_private(path, data)
    else:
        pki.write_public(path, data)
    return path


def _day(t):
    return t.strftime("%Y-%m-%d")

# Why the broker refused this board: fleetwire.identity loads this module when a handshake
# fails, asks classify(), and drops it again, so a board that connects holds none of it.
#
# The broker tells a board very little: when it refuses the board's certificate, OpenSSL
# ends the TLS 1.2 handshake and mbedTLS reports a broken pipe or a reset (MicroPython
# drops the alert's description, if one came). So the reason is what the board can check
# itself, in this order: no certificate at all; its certificate's dates against the clock
# (when the clock is set: not before its CA was made); its issuer against the CA the broker
# trusts (tls_issuer, else tls_ca: in a fleetwire fleet one CA signs the broker and the
# boards); and a certificate that passes all that and is still refused has been revoked.
# The broker's own certificate is checked by mbedTLS, which says what is wrong (ValueError).
import time

from .errors import (
    IdentityUnusable,
    BrokerNotTrusted,
    NoCertificate,
    CertificateExpired,
    CertificateNotYetValid,
    UnknownIssuer,
    CertificateRevoked,
    HUNG_UP,
)


def say(cls, key, *values):
    # the verdict: the class, and the key and values of its text in fleetwire.tls.reasons,
    # which identity.explain() loads once this module has been dropped (less at once)
    return cls, key, values


def classify(e, cfg):
    """Why this connect failed -> (exception class, text key, values), or e itself when it
    is not a refusal."""
    host = cfg.get("broker")
    if isinstance(e, ValueError):  # mbedTLS's verdict on the broker's certificate
        why = " ".join(str(a) for a in e.args).strip().replace("\n", "; ") or "verification failed"
        ca = info(cfg.get("tls_ca"))
        now = _now()
        if ca and now < ca[2]:
            return say(BrokerNotTrusted, "clock", host, why, cfg.get("tls_ca"), _show(now))
        return say(BrokerNotTrusted, "untrusted", host, why, cfg.get("tls_ca"))
    code = e.args[0] if e.args else None
    if code not in HUNG_UP:
        return e  # the network's trouble (refused, unreachable, timed out), not the certificate's
    if not cfg.get("tls_cert"):
        return say(NoCertificate, "no_cert", host)
    cert = info(cfg["tls_cert"])
    if cert is None:
        return say(IdentityUnusable, "bad_cert", cfg["tls_cert"])
    serial, issuer, not_before, not_after, subject, aki, _ = cert
    cn = _cn(subject)
    ca = info(cfg.get("tls_ca"))
    now = _now()
    if ca and now >= ca[2]:  # the clock is set: dates mean something
        if now > not_after:
            return say(CertificateExpired, "expired", host, cn, serial, _show(not_after), _show(now))
        if now < not_before:
            return say(CertificateNotYetValid, "early", host, cn, serial, _show(not_before), _show(now))
    expect = cfg.get("tls_issuer", cfg.get("tls_ca"))
    trusted = info(expect) if expect else None
    # by key id where both have one (two CAs may share a name), else by name
    if trusted and (aki != trusted[6] if aki and trusted[6] else issuer != trusted[4]):
        return say(UnknownIssuer, "issuer", host, cn, serial, _cn(issuer), _cn(trusted[4]), expect)
    return say(CertificateRevoked, "revoked", host, cn, serial, _cn(issuer))


def unusable(key, e, cfg):
    """The board's identity could not be loaded: which file, and why -> as classify."""
    if key == "tls_ca" and not cfg.get("tls_ca"):
        return say(IdentityUnusable, "no_ca")
    text = " ".join(str(a) for a in e.args)
    if isinstance(e, ValueError) and key == "tls_cert" and "key" in text:
        key = "tls_key"  # load_cert_chain says "invalid key" or "invalid cert"
    path = cfg.get(key)
    if not path:
        return say(IdentityUnusable, "unset", key)
    if isinstance(e, OSError):
        return say(IdentityUnusable, "missing", key, path)
    return say(IdentityUnusable, "unloadable", key, path, "key" if key == "tls_key" else "certificate", text)


# ---- reading a DER certificate: the few fields above, nothing more


def _tlv(b, i):
    # -> (tag, start of the value, its end); never past the buffer
    if i + 2 > len(b):
        raise ValueError("truncated")
    t = b[i]
    n = b[i + 1]
    i += 2
    if n & 0x80:
        k = n & 0x7F
        if k > 3 or i + k > len(b):
            raise ValueError("bad length")
        n = 0
        for _ in range(k):
            n = n << 8 | b[i]
            i += 1
    if i + n > len(b):
        raise ValueError("truncated")
    return t, i, i + n


def _time(tag, v):
    # UTCTime YYMMDDHHMMSSZ or GeneralizedTime YYYYMMDDHHMMSSZ -> "YYYYMMDDHHMMSS"
    s = bytes(v).decode()
    if tag == 0x17:
        yy = int(s[:2])
        return "%d%s" % (2000 + yy if yy < 50 else 1900 + yy, s[2:12])
    return s[:14]


def info(path):
    """(serial hex, issuer Name, not before, not after, subject Name, authority key id,
    subject key id) of a DER certificate file, or None if it cannot be read."""
    try:
        with open(path, "rb") as f:
            b = f.read()
        _, i, _ = _tlv(b, 0)  # Certificate
        _, i, end = _tlv(b, i)  # TBSCertificate
        t, s, e = _tlv(b, i)
        if t == 0xA0:  # version
            t, s, e = _tlv(b, e)
        serial = "".join("%02x" % x for x in b[s:e])
        serial = serial.lstrip("0") or "0"  # as `fleetwire ca list` shows it
        _, _, i = _tlv(b, e)  # signature algorithm
        _, _, e = _tlv(b, i)
        issuer = b[i:e]
        _, s, i = _tlv(b, e)  # validity
        t, a, z = _tlv(b, s)
        not_before = _time(t, b[a:z])
        t, a, z = _tlv(b, z)
        not_after = _time(t, b[a:z])
        _, _, e = _tlv(b, i)
        subject = b[i:e]
        aki = ski = None
        _, _, i = _tlv(b, e)  # subject public key info
        while i < end:  # [1], [2] unique ids, [3] extensions
            t, s, i = _tlv(b, i)
            if t != 0xA3:
                continue
            _, j, z = _tlv(b, s)
            while j < z:  # Extension: OID, critical?, OCTET STRING
                _, x, j = _tlv(b, j)
                _, o, oe = _tlv(b, x)
                oid = b[o:oe]
                t, v, ve = _tlv(b, oe)
                if t == 0x01:
                    t, v, ve = _tlv(b, ve)
                if oid == b"\x55\x1d\x0e":  # subjectKeyIdentifier: OCTET STRING
                    _, v, ve = _tlv(b, v)
                    ski = b[v:ve]
                elif oid == b"\x55\x1d\x23":  # authorityKeyIdentifier: SEQUENCE {[0] keyid}
                    _, v, ve = _tlv(b, v)
                    if v < ve and b[v] == 0x80:
                        _, v, ve = _tlv(b, v)
                        aki = b[v:ve]
        return serial, issuer, not_before, not_after, subject, aki, ski
    except (OSError, ValueError, TypeError, IndexError):
        return None


def _cn(name):
    # The CN in a DER Name (OID 2.5.4.3), or "?"
    k = name.find(b"\x06\x03\x55\x04\x03")
    if k < 0:
        return "?"
    try:
        _, s, e = _tlv(name, k + 5)
        return bytes(name[s:e]).decode()
    except (ValueError, UnicodeError):
        return "?"


def _now():
    return "%04d%02d%02d%02d%02d%02d" % tuple(time.gmtime()[:6])


def _show(t):
    return "%s-%s-%s %s:%s UTC" % (t[:4], t[4:6], t[6:8], t[8:10], t[10:12])

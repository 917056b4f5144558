"""The fleet's certificates, made with the `cryptography` package (never the openssl command
line): a fleet CA kept on the operator's machine, a certificate per board whose subject (CN) is
its device_id, certificates for the host tools (operator, collector) and for the broker, a
revocation list (CRL) the broker reads.

A CA directory holds:
    ca.pem      the CA certificate (public: brokers and boards get copies)
    ca.key      its private key (mode 600; never printed, never copied anywhere)
    index.json  every certificate issued: name, role, serial, validity, revocation
    index.json.lock  held while the index changes (two issuers may share a CA directory)
    crl.pem     the revocation list, rewritten by every revocation
    brokers.json  broker directories written by `fleetwire broker-config` on this machine,
                whose copy of crl.pem a revocation refreshes
    services.json the service names those brokers' ACLs give rights to (operator, collector):
                no board may take one

Keys are EC P-256: small certificates, and a handshake an ESP32 does in well under a second.
Every check of input raises PKIError with a reason a person can act on.
"""

import contextlib
import datetime
import fcntl
import ipaddress
import json
import os
import re
import shutil
import tempfile

from cryptography import x509
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_DAYS = 3650
LEAF_DAYS = 730  # a board's certificate: re-deploying renews it when RENEW_DAYS are left
RENEW_DAYS = 30
CRL_DAYS = 365  # an expired CRL makes the broker refuse everyone: `fleetwire ca crl` renews it
ROLES = ("device", "operator", "collector", "server")
# The services' default names: an ACL names them, so a board may never be called so.
SERVICES = {"operator": "operator", "collector": "collector"}
# Names end up in topics (fleet/<name>/...) through the broker's ACL patterns, so none of
# MQTT's special characters; mosquitto refuses pattern ACLs to names with + # or / anyway.
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class PKIError(Exception):
    """A certificate, key or CA that cannot be used, and why."""


def default_dir():
    """The operator's CA directory: $FLEETWIRE_CA, else ~/.fleetwire/ca."""
    return os.environ.get("FLEETWIRE_CA") or os.path.join(os.path.expanduser("~"), ".fleetwire", "ca")


def check_name(name, what="name"):
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise PKIError(
            "%s %r: use 1 to 64 letters, digits, '_', '.', '-' (it becomes the certificate's CN and "
            "a topic level fleet/<name>/)" % (what, name)
        )
    return name


def _now():
    return datetime.datetime.now(datetime.timezone.utc)


def _name(cn):
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def common_name(cert):
    names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return names[0].value if names else None


def not_after(cert):
    return cert.not_valid_after_utc


def serial_hex(cert_or_serial):
    n = cert_or_serial if isinstance(cert_or_serial, int) else cert_or_serial.serial_number
    return "%x" % n


def fingerprint(cert):
    return cert.fingerprint(hashes.SHA256()).hex(":")


# ---- making certificates


def new_key():
    return ec.generate_private_key(ec.SECP256R1())


def make_ca(name, days=CA_DAYS, key=None):
    """A self-signed CA -> (key, cert). The extensions satisfy Python's VERIFY_X509_STRICT
    (3.13's default) and mbedTLS (MicroPython)."""
    key = key or new_key()
    now = _now()
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(name))
        .issuer_name(_name(name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return key, cert


def sign(ca_key, ca_cert, name, public_key, role="device", hosts=(), days=LEAF_DAYS, not_before=None):
    """A leaf certificate for `name` -> cert. role "server" is for a broker (serverAuth, with
    hosts as DNS names or IP addresses in subjectAltName); every other role is a client."""
    if role not in ROLES:
        raise PKIError("role %r: one of %s" % (role, ", ".join(ROLES)))
    start = not_before or (_now() - datetime.timedelta(minutes=5))
    b = (
        x509.CertificateBuilder()
        .subject_name(_name(name))
        .issuer_name(ca_cert.subject)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(start + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH if role == "server" else ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
    )
    if hosts:
        alt = []
        for h in hosts:
            try:
                alt.append(x509.IPAddress(ipaddress.ip_address(h)))
            except ValueError:
                alt.append(x509.DNSName(h))
        b = b.add_extension(x509.SubjectAlternativeName(alt), critical=False)
    return b.sign(ca_key, hashes.SHA256())


# ---- reading and checking what a person hands us


def _read(path, what):
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        raise PKIError("%s %s: no such file" % (what, path))
    except IsADirectoryError:
        raise PKIError("%s %s: is a directory, not a file" % (what, path))
    except OSError as e:
        raise PKIError("%s %s: cannot read it: %s" % (what, path, e.strerror))


def load_certificate(path, what="certificate"):
    """A certificate from a PEM or DER file -> x509.Certificate."""
    data = _read(path, what)
    try:
        if b"-----BEGIN" in data:
            return x509.load_pem_x509_certificate(data)
        return x509.load_der_x509_certificate(data)
    except ValueError:
        if b"PRIVATE KEY" in data:
            raise PKIError("%s %s holds a private key, not a certificate" % (what, path))
        raise PKIError("%s %s is not an X.509 certificate (PEM or DER)" % (what, path))


def load_private_key(path, what="key"):
    """A private key from a PEM or DER file (unencrypted)."""
    data = _read(path, what)
    try:
        if b"-----BEGIN" in data:
            return serialization.load_pem_private_key(data, password=None)
        return serialization.load_der_private_key(data, password=None)
    except TypeError:
        raise PKIError("%s %s is encrypted: a board cannot use a key with a passphrase" % (what, path))
    except (ValueError, UnsupportedAlgorithm):
        if b"CERTIFICATE" in data:
            raise PKIError("%s %s holds a certificate, not a private key" % (what, path))
        raise PKIError("%s %s is not a private key (PEM or DER)" % (what, path))


def check_pair(cert, key, what="certificate"):
    """The certificate must be the key's: same public key."""
    spki = serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    if cert.public_key().public_bytes(*spki) != key.public_key().public_bytes(*spki):
        raise PKIError(
            "%s (CN %s) does not match its key: they are from different pairs" % (what, common_name(cert))
        )


def is_ca(cert):
    try:
        return cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    except x509.ExtensionNotFound:
        return False


def check_ca(cert, what="CA"):
    if not is_ca(cert):
        raise PKIError(
            "%s (CN %s) is not a CA certificate (no basicConstraints CA:TRUE): give the certificate "
            "of the authority that signed it, not a leaf" % (what, common_name(cert))
        )


def signed_by(cert, ca_cert):
    """True when ca_cert's key signed cert."""
    if cert.issuer != ca_cert.subject:
        return False
    try:
        cert.verify_directly_issued_by(ca_cert)
        return True
    except (ValueError, TypeError, InvalidSignature):
        return False


# ---- bytes


def der(cert):
    return cert.public_bytes(serialization.Encoding.DER)


def pem(cert):
    return cert.public_bytes(serialization.Encoding.PEM)


def key_der(key):
    return key.private_bytes(
        serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def key_pem(key):
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def write_private(path, data):
    """Write a key: mode 600 from the first byte, replaced atomically."""
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".key-")
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def write_public(path, data):
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def write_credentials(issued, directory):
    """An Issued's certificate and key as files for a host tool -> (DIR/NAME.pem, DIR/NAME.key),
    the key of mode 600."""
    os.makedirs(directory, exist_ok=True)
    base = os.path.join(directory, issued.name)
    write_private(base + ".key", key_pem(issued.key))
    write_public(base + ".pem", pem(issued.cert))
    return base + ".pem", base + ".key"


# ---- the fleet CA


class Issued:
    """A key and the certificate issued for it (the key lives in memory only)."""

    def __init__(self, key, cert, role):
        self.key, self.cert, self.role = key, cert, role

    @property
    def name(self):
        return common_name(self.cert)


class FleetCA:
    """FleetCA(directory): a CA made by FleetCA.create() (`fleetwire ca init`)."""

    def __init__(self, directory):
        self.dir = os.path.abspath(directory)
        self.cert_path = os.path.join(self.dir, "ca.pem")
        self.key_path = os.path.join(self.dir, "ca.key")
        self.index_path = os.path.join(self.dir, "index.json")
        self.crl_path = os.path.join(self.dir, "crl.pem")
        self.brokers_path = os.path.join(self.dir, "brokers.json")
        if not os.path.isdir(self.dir) or not os.path.exists(self.cert_path):
            raise PKIError(
                "no fleet CA in %s: make one with `fleetwire ca init --ca %s`" % (self.dir, self.dir)
            )
        self.cert = load_certificate(self.cert_path, "fleet CA certificate")
        check_ca(self.cert, "fleet CA certificate %s" % self.cert_path)
        self.key = load_private_key(self.key_path, "fleet CA key")
        if self.cert.public_key().public_numbers() != self.key.public_key().public_numbers():
            raise PKIError("fleet CA key %s is not the key of %s" % (self.key_path, self.cert_path))

    @classmethod
    def create(cls, directory, name="fleetwire fleet CA", days=CA_DAYS, force=False):
        d = os.path.abspath(directory)
        if os.path.exists(os.path.join(d, "ca.pem")) and not force:
            raise PKIError(
                "%s already holds a fleet CA; every board's certificate depends on it. "
                "--force replaces it (and every board then needs `fleetwire deploy --rotate`)" % d
            )
        os.makedirs(d, mode=0o700, exist_ok=True)
        key, cert = make_ca(name, days)
        write_private(os.path.join(d, "ca.key"), key_pem(key))
        write_public(os.path.join(d, "ca.pem"), pem(cert))
        write_public(os.path.join(d, "index.json"), b'{"issued": []}\n')
        write_public(os.path.join(d, "brokers.json"), b"[]\n")  # a replaced CA's brokers are not this one's
        ca = cls(d)
        ca.write_crl()
        return ca

    @property
    def name(self):
        return common_name(self.cert)

    # ---- the index

    def index(self):
        try:
            with open(self.index_path) as f:
                return json.load(f)["issued"]
        except FileNotFoundError:
            return []
        except (ValueError, KeyError, TypeError):
            raise PKIError("the CA's index %s is damaged (not the JSON fleetwire writes)" % self.index_path)

    @contextlib.contextmanager
    def _changing(self):
        """Hold the index for a read-change-write: two issuers on one CA directory (two
        `ca serve`, or `ca issue` beside one) must not write over each other's records."""
        with open(self.index_path + ".lock", "a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    def _save_index(self, entries):
        write_public(self.index_path, (json.dumps({"issued": entries}, indent=1) + "\n").encode())

    def role_of(self, name):
        """The role `name` has: a service name's (reserved by default or by a broker's ACL), or
        the one its newest certificate was issued for, or None."""
        services = dict(SERVICES, **self.services())
        if name in services:
            return services[name]
        roles = [e["role"] for e in self.index() if e["name"] == name]
        return roles[-1] if roles else None

    def services(self):
        try:
            with open(os.path.join(self.dir, "services.json")) as f:
                return json.load(f)
        except (FileNotFoundError, ValueError):
            return {}

    def reserve(self, name, role):
        """Keep `name` for a service whose rights a broker's ACL names."""
        check_name(name, "%s name" % role)
        have = self.role_of(name)
        if have not in (None, role):
            raise PKIError(
                "%r is the name of this CA's %s identity; the %s needs another name" % (name, have, role)
            )
        d = self.services()
        d[name] = role
        write_public(os.path.join(self.dir, "services.json"), (json.dumps(d, indent=1) + "\n").encode())

    def lookup(self, cert):
        """The index entry of a certificate this CA issued, or None."""
        s = serial_hex(cert)
        for e in self.index():
            if e["serial"] == s:
                return e
        return None

    def revoked(self, cert):
        e = self.lookup(cert)
        return bool(e and e.get("revoked"))

    # ---- issuing

    def issue(self, name, role="device", hosts=(), days=None, not_before=None, record=True):
        """A new key and certificate for `name` -> Issued. A name keeps its role: a device may
        not take a service's name (it would get that service's rights at the broker)."""
        check_name(name, "device id" if role == "device" else "name")
        if role not in ROLES:
            raise PKIError("role %r: one of %s" % (role, ", ".join(ROLES)))
        have = self.role_of(name)
        if have and have != role and "server" not in (have, role):
            raise PKIError(
                "%r is the name of this CA's %s identity; a %s must have a name of its own"
                % (name, have, role)
            )
        key = new_key()
        cert = sign(
            self.key,
            self.cert,
            name,
            key.public_key(),
            role,
            hosts,
            days or (LEAF_DAYS if role != "server" else CA_DAYS // 2),
            not_before,
        )
        issued = Issued(key, cert, role)
        if record:
            self.record(issued)
        return issued

    def credentials(self, name, role, directory, days=None):
        """Issue `name` a key and certificate and write them for a host tool -> (certificate
        path, key path): DIR/NAME.pem and DIR/NAME.key (mode 600)."""
        return write_credentials(self.issue(name, role, days=days), directory)

    def record(self, *issued):
        """Add certificates to the index (one write for many)."""
        with self._changing():
            self._record(issued)

    def _record(self, issued):
        entries = self.index()
        for i in issued:
            c = i.cert
            entries.append(
                {
                    "name": i.name,
                    "role": i.role,
                    "serial": serial_hex(c),
                    "not_before": c.not_valid_before_utc.isoformat(),
                    "not_after": c.not_valid_after_utc.isoformat(),
                    "revoked": None,
                }
            )
        self._save_index(entries)

    # ---- revoking

    def revoke(self, name=None, serial=None):
        """Revoke every current certificate of `name` (or the one with `serial`) -> the
        entries revoked. Rewrites crl.pem and the copies in known broker directories."""
        with self._changing():
            return self._revoke(name, serial)

    def _revoke(self, name, serial):
        entries = self.index()
        now = _now().isoformat()
        hit = []
        for e in entries:
            if e.get("revoked"):
                continue
            if (name is not None and e["name"] == name) or (serial is not None and e["serial"] == serial):
                e["revoked"] = now
                hit.append(e)
        if not hit:
            known = name if name is not None else serial
            if any(e["name"] == name or e["serial"] == serial for e in entries):
                raise PKIError("%s has no certificate left to revoke (all revoked already)" % known)
            raise PKIError(
                "this CA never issued a certificate for %r (`fleetwire ca list` shows what it did)" % known
            )
        self._save_index(entries)
        self.write_crl()
        return hit

    def write_crl(self, days=CRL_DAYS):
        """crl.pem from the index -> the paths written (the CA's own and the brokers' copies)."""
        now = _now()
        b = (
            x509.CertificateRevocationListBuilder()
            .issuer_name(self.cert.subject)
            .last_update(now - datetime.timedelta(minutes=5))
            .next_update(now + datetime.timedelta(days=days))
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()), critical=False
            )
            .add_extension(x509.CRLNumber(int(now.timestamp() * 1000)), critical=False)
        )
        for e in self.index():
            if e.get("revoked"):
                b = b.add_revoked_certificate(
                    x509.RevokedCertificateBuilder()
                    .serial_number(int(e["serial"], 16))
                    .revocation_date(datetime.datetime.fromisoformat(e["revoked"]))
                    .build()
                )
        data = b.sign(self.key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM)
        write_public(self.crl_path, data)
        written = [self.crl_path]
        for d in self.brokers():
            target = os.path.join(d, "crl.pem")
            if os.path.isdir(d):
                write_public(target, data)
                written.append(target)
        return written

    # ---- brokers configured from this CA on this machine

    def brokers(self):
        try:
            with open(self.brokers_path) as f:
                return json.load(f)
        except (FileNotFoundError, ValueError):
            return []

    def add_broker(self, directory):
        d = os.path.abspath(directory)
        known = self.brokers()
        if d not in known:
            write_public(self.brokers_path, (json.dumps(known + [d], indent=1) + "\n").encode())
        shutil.copyfile(self.crl_path, os.path.join(d, "crl.pem"))

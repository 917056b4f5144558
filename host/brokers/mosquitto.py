"""A real mosquitto broker on 127.0.0.1 and a free port, for tests, benches and the
demo. Its config, log, persistence store and TLS files live in one temp dir that
outlives stop()/start(), so a restart keeps the port and the stored sessions.
Optional: a TLS listener with a CA generated at start, a second TLS listener whose
certificate names another host, a password file, inflight/queue limits; or, with
identity=, only a mutual-TLS listener that enforces fleet identity (the lines
`fleetwire broker-config` writes: a certificate per client, CN as user name, ACL, CRL).
Every broker process is killed at interpreter exit even if the caller forgot.

MatrixMosquitto, at the end, is mosquitto as one broker of the matrix (fleetwire.host.brokers):
anonymous clients, sessions and retained messages in memory, $SYS every second, and the
dynamic-security plugin it ships to refuse subscriptions under DENIED_PREFIX (its acl_file
cannot: mosquitto grants such a subscription and only filters what it delivers)."""

import base64
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

from .base import HOST, Broker, Owned, Quirk, accepts, die_with_parent, free_port  # noqa: F401
from fleetwire.host import Missing

# Debian installs it in /usr/sbin, which is not on a normal user's PATH.
FALLBACK_PATHS = ("/usr/sbin/mosquitto", "/usr/local/sbin/mosquitto", "/usr/bin/mosquitto")
INSTALL_HINT = "apt-get install -y mosquitto"


class MosquittoMissing(Missing):
    pass


class MosquittoError(RuntimeError):
    pass


def find_mosquitto():
    """Path of the mosquitto binary: PATH first, then the usual sbin places."""
    for p in (shutil.which("mosquitto"),) + tuple(FALLBACK_PATHS):
        if p and os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    raise MosquittoMissing(
        "mosquitto is not installed (looked on PATH and in %s); install it "
        "with: %s  (bash tools/run.sh test does it)" % (", ".join(FALLBACK_PATHS), INSTALL_HINT)
    )


def hash_password(password, salt=None):
    """A password_file entry in mosquitto's "$6$" form (SHA-512 of password + salt),
    which every 1.x and 2.x broker reads; saves needing mosquitto_passwd."""
    salt = os.urandom(12) if salt is None else salt
    digest = hashlib.sha512(password.encode() + salt).digest()
    return "$6$%s$%s" % (base64.b64encode(salt).decode(), base64.b64encode(digest).decode())


# ---- certificates

WRONG_HOSTNAME = "wrong-host.fleetwire.invalid"


class Certs:
    """Paths of the generated files: ca_pem, ca_der, ca_key, server_pem, server_key and
    wrong_pem (signed by the same CA, same key, but only for WRONG_HOSTNAME)."""

    def __init__(self, d):
        for name in ("ca.pem", "ca.der", "ca.key", "server.pem", "server.key", "wrong.pem"):
            setattr(self, name.replace(".", "_"), os.path.join(d, name))


def make_certs(d, hostnames=("localhost",), ips=(HOST,), days=30):
    """A throwaway CA and server certificates in directory d -> Certs (made with the
    `cryptography` package; the extensions satisfy Python's VERIFY_X509_STRICT and mbedTLS)."""
    from fleetwire.host.identity import pki

    os.makedirs(d, exist_ok=True)
    c = Certs(d)
    ca_key, ca = pki.make_ca("fleetwire test CA", days)
    key = pki.new_key()
    server = pki.sign(
        ca_key,
        ca,
        (list(hostnames) + list(ips))[0],
        key.public_key(),
        "server",
        list(hostnames) + list(ips),
        days,
    )
    wrong = pki.sign(ca_key, ca, WRONG_HOSTNAME, key.public_key(), "server", [WRONG_HOSTNAME], days)
    pki.write_private(c.ca_key, pki.key_pem(ca_key))
    pki.write_private(c.server_key, pki.key_pem(key))
    for path, data in (
        (c.ca_pem, pki.pem(ca)),
        (c.ca_der, pki.der(ca)),
        (c.server_pem, pki.pem(server)),
        (c.wrong_pem, pki.pem(wrong)),
    ):
        pki.write_public(path, data)
    return c


# ---- the broker


class Mosquitto(Owned):
    """mosquitto on 127.0.0.1. Use `with Mosquitto(...) as b:` or start()/close().

    persistence: True (a store in the temp dir) or a directory path; kept across
        stop()/start()/restart()/kill(). A clean stop() writes the store; after
        kill() only what was last saved survives: snapshot() saves now, autosave
        otherwise (mosquitto's default: every 1800 s, so in effect never).
    tls: also a TLS listener (.tls_port, .ca_pem, .ca_der) and one presenting a
        certificate for another host name (.tls_mismatch_port).
    users: {name: password} written to a password_file; with allow_anonymous=False
        only those may connect.
    identity: a fleet CA (fleetwire.host.identity.pki.FleetCA): the broker then has one listener,
        .port, mutual TLS only, as `fleetwire broker-config` writes it (its certificate
        for localhost and 127.0.0.1 issued by that CA, the CA's crl.pem, the identity ACL;
        .ca_pem/.ca_der are the fleet CA's). reload() makes it read a new CRL.
        identity_services: {"operators": [...], "collectors": [...]} for the ACL.
    max_inflight / max_queued: mosquitto's max_inflight_messages / max_queued_messages.
    extra_config: lines appended after the listeners (so listener options in it
        apply to the last listener).
    """

    def __init__(
        self,
        persistence=False,
        tls=False,
        max_inflight=None,
        max_queued=None,
        users=None,
        allow_anonymous=True,
        autosave_interval=None,
        autosave_on_changes=False,
        extra_config="",
        start_timeout=10,
        identity=None,
        identity_services=None,
    ):
        if identity is not None and (tls or users):
            raise ValueError("identity= makes the only listener mutual TLS; it takes no tls= or users=")
        self.binary = find_mosquitto()
        self.host = HOST
        self.dir = tempfile.mkdtemp(prefix="fleetwire-mosquitto-")
        self.tls = tls
        self.persistence = persistence
        self.max_inflight = max_inflight
        self.max_queued = max_queued
        self.users = dict(users or {})
        self.allow_anonymous = allow_anonymous
        self.autosave_interval = autosave_interval
        self.autosave_on_changes = autosave_on_changes
        self.extra_config = extra_config
        self.start_timeout = start_timeout
        self.config_path = os.path.join(self.dir, "mosquitto.conf")
        self.log_path = os.path.join(self.dir, "mosquitto.log")
        self._stderr_path = os.path.join(self.dir, "stderr.txt")
        if persistence is True:
            self.persistence_dir = os.path.join(self.dir, "store")
        else:
            self.persistence_dir = os.fspath(persistence) if persistence else None
        if self.persistence_dir:
            os.makedirs(self.persistence_dir, exist_ok=True)
        self.identity = identity
        try:
            self.certs = make_certs(os.path.join(self.dir, "tls")) if tls else None
            if identity is not None:
                self._identity_files(identity, identity_services or {})
        except BaseException:
            shutil.rmtree(self.dir, ignore_errors=True)
            raise
        self.ca_pem = self.certs.ca_pem if tls else None
        self.ca_der = self.certs.ca_der if tls else None
        if identity is not None:
            self.ca_pem = identity.cert_path
            self.ca_der = os.path.join(self.dir, "identity", "ca.der")
        self.password_file = None
        if self.users:
            self.password_file = os.path.join(self.dir, "passwords")
            fd = os.open(self.password_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                for name, pw in self.users.items():
                    f.write("%s:%s\n" % (name, hash_password(pw)))
        self.proc = None
        self._pick_ports()
        self.own()

    def _identity_files(self, ca, services):
        from fleetwire.host.identity import brokerconf, pki

        d = os.path.join(self.dir, "identity")
        os.makedirs(d)
        issued = ca.issue("localhost", role="server", hosts=("localhost", HOST), record=False)
        self._server_pem = os.path.join(d, "server.pem")
        self._server_key = os.path.join(d, "server.key")
        pki.write_private(self._server_key, pki.key_pem(issued.key))
        pki.write_public(self._server_pem, pki.pem(issued.cert))
        pki.write_public(os.path.join(d, "ca.der"), pki.der(ca.cert))
        self._acl = os.path.join(d, "acl")
        pki.write_public(
            self._acl,
            brokerconf.acl_text(
                services.get("operators", ("operator",)), services.get("collectors", ("collector",))
            ).encode(),
        )

    def _pick_ports(self):
        self.port = free_port()
        self.tls_port = free_port() if self.tls else None
        self.tls_mismatch_port = free_port() if self.tls else None

    @property
    def ports(self):
        return [p for p in (self.port, self.tls_port, self.tls_mismatch_port) if p]

    @property
    def address(self):
        return (self.host, self.port)

    @property
    def running(self):
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self):
        return self.proc.pid if self.running else None

    def _config(self):
        # Global options first: with several listeners, mosquitto applies TLS options
        # to the listener above them.
        lines = ["# generated by fleetwire.host.brokers.mosquitto"]
        if os.geteuid() == 0:
            # As root, mosquitto would switch to user "mosquitto", which cannot
            # read or write this private temp dir.
            lines.append("user root")
        lines += ["per_listener_settings false"]
        if self.identity is not None:
            from fleetwire.host.identity import brokerconf

            lines += brokerconf.security_lines(self._acl)
        else:
            lines.append("allow_anonymous %s" % ("true" if self.allow_anonymous else "false"))
        lines += [
            "log_dest file %s" % self.log_path,
            "log_type all",
            "log_timestamp true",
            "connection_messages true",
        ]
        if self.password_file:
            lines.append("password_file %s" % self.password_file)
        if self.persistence_dir:
            lines += [
                "persistence true",
                # 1.x joins location and file name as is; 2.x adds its own "/"
                "persistence_location %s/" % self.persistence_dir.rstrip("/"),
                "persistence_file mosquitto.db",
            ]
            if self.autosave_interval is not None:
                lines.append("autosave_interval %d" % self.autosave_interval)
            if self.autosave_on_changes:
                lines.append("autosave_on_changes true")
        if self.max_inflight is not None:
            lines.append("max_inflight_messages %d" % self.max_inflight)
        if self.max_queued is not None:
            lines.append("max_queued_messages %d" % self.max_queued)
        if self.identity is not None:
            from fleetwire.host.identity import brokerconf

            lines += brokerconf.listener_lines(
                self.port,
                self.host,
                self.identity.cert_path,
                self._server_pem,
                self._server_key,
                self.identity.crl_path,
            )
        else:
            lines.append("listener %d %s" % (self.port, self.host))
        if self.tls:
            c = self.certs
            for port, cert in ((self.tls_port, c.server_pem), (self.tls_mismatch_port, c.wrong_pem)):
                lines += [
                    "listener %d %s" % (port, self.host),
                    "cafile %s" % c.ca_pem,
                    "certfile %s" % cert,
                    "keyfile %s" % c.server_key,
                ]
        if self.extra_config:
            lines.append(self.extra_config)
        return "\n".join(lines) + "\n"

    def start(self, timeout=None):
        """Start (again) on the same ports; returns self once every listener accepts."""
        if self._closed:
            raise MosquittoError("this Mosquitto was closed")
        if self.running:
            return self
        timeout = self.start_timeout if timeout is None else timeout
        first = self.proc is None
        for attempt in range(3):
            with open(self.config_path, "w") as f:
                f.write(self._config())
            try:
                return self._launch(timeout)
            except MosquittoError as e:
                # The ports were free when picked but something took one since:
                # before the first start nothing depends on them yet, so pick again.
                if first and attempt < 2 and "in use" in str(e):
                    self._pick_ports()
                    continue
                raise

    def _launch(self, timeout):
        kw = {}
        if sys.platform.startswith("linux") and threading.current_thread() is threading.main_thread():
            kw["preexec_fn"] = die_with_parent
        with open(self._stderr_path, "ab") as err:
            self.proc = subprocess.Popen(
                [self.binary, "-c", self.config_path],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
                cwd=self.dir,
                **kw,
            )
        deadline = time.monotonic() + timeout
        waiting = self.ports
        while True:
            if self.proc.poll() is not None:
                rc = self.proc.returncode
                self.proc.wait()
                self.proc = None
                raise MosquittoError("mosquitto exited with %s while starting:\n%s" % (rc, self._tail()))
            waiting = [p for p in waiting if not accepts(self.host, p)]
            if not waiting:
                return self
            if time.monotonic() > deadline:
                self.kill()
                raise MosquittoError(
                    "mosquitto did not listen on %s:%s within %s s:\n%s"
                    % (self.host, waiting, timeout, self._tail())
                )
            time.sleep(0.01)

    def _tail(self, n=30):
        text = ""
        try:
            with open(self._stderr_path, errors="replace") as f:
                text = f.read()
        except OSError:
            pass
        return "\n".join((text + self.log_text()).splitlines()[-n:])

    def stop(self, timeout=10):
        """Clean shutdown (SIGTERM): clients see the connection close, and with
        persistence the store is written."""
        p = self.proc
        if p is not None and p.poll() is None:
            p.send_signal(signal.SIGCONT)  # a frozen broker would hold the TERM pending
            p.terminate()
            try:
                p.wait(timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.proc = None

    def kill(self):
        """A crash (SIGKILL): nothing is saved, sockets vanish."""
        p = self.proc
        if p is not None and p.poll() is None:
            p.kill()
            p.wait()
        self.proc = None

    def restart(self, timeout=None):
        self.stop()
        return self.start(timeout)

    def reload(self, timeout=5):
        """SIGHUP: mosquitto reads its configuration, the ACL and the CRL again (connected
        clients stay: a revoked certificate is refused from its next connection on).
        Returns once the broker says it has."""
        if self.running:
            n = self.log_text().count("Reloading config.")
            self.proc.send_signal(signal.SIGHUP)
            self.wait_for_log("Reloading config.", n + 1, timeout)

    def freeze(self):
        """SIGSTOP: connections stay open and the kernel still accepts new ones, but
        nothing is answered (a hung broker, for keepalive tests). thaw() resumes."""
        if self.running:
            self.proc.send_signal(signal.SIGSTOP)

    def thaw(self):
        if self.running:
            self.proc.send_signal(signal.SIGCONT)

    def log_text(self):
        """The broker's log so far (all starts of this instance)."""
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    @property
    def store_path(self):
        return os.path.join(self.persistence_dir, "mosquitto.db") if self.persistence_dir else None

    def _store_id(self):
        try:
            st = os.stat(self.store_path)
        except FileNotFoundError:
            return None
        return (st.st_ino, st.st_mtime_ns, st.st_size)

    def snapshot(self, timeout=5):
        """Write the persistence store now (SIGUSR1) and wait until it is on disk, so
        a kill() after it keeps everything the broker had acknowledged before.

        mosquitto writes mosquitto.db.new and renames it over mosquitto.db, so a
        new inode there means a complete write; the broker is single-threaded, so
        that write started after every acknowledgement we had already received."""
        if not self.persistence_dir:
            raise MosquittoError("snapshot() needs Mosquitto(persistence=...)")
        if not self.running:
            raise MosquittoError("snapshot() needs a running broker")
        before = self._store_id()
        self.proc.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + timeout
        while self._store_id() == before:
            if time.monotonic() > deadline:
                raise MosquittoError("mosquitto did not write %s within %s s" % (self.store_path, timeout))
            time.sleep(0.01)

    def wait_for_log(self, text, count=1, timeout=5):
        """Wait until `text` is in the log `count` times; -> the log. Raises AssertionError."""
        deadline = time.monotonic() + timeout
        while True:
            log = self.log_text()
            if log.count(text) >= count:
                return log
            if time.monotonic() > deadline:
                raise AssertionError(
                    "%r not %d time(s) in the mosquitto log within %s s; log ends:\n%s"
                    % (text, count, timeout, "\n".join(log.splitlines()[-20:]))
                )
            time.sleep(0.02)

    def __repr__(self):
        return "<Mosquitto %s:%s%s %s>" % (
            self.host,
            self.port,
            " tls:%s" % self.tls_port if self.tls else "",
            "running" if self.running else "stopped",
        )


DYNSEC_PATHS = (
    "/usr/lib/x86_64-linux-gnu/mosquitto_dynamic_security.so",
    "/usr/lib/aarch64-linux-gnu/mosquitto_dynamic_security.so",
    "/usr/lib/mosquitto_dynamic_security.so",
)


def find_dynsec():
    for p in DYNSEC_PATHS:
        if os.path.isfile(p):
            return p
    import glob

    found = glob.glob("/usr/lib/*/mosquitto_dynamic_security.so")
    if found:
        return found[0]
    from .base import BrokerMissing

    raise BrokerMissing(
        "mosquitto's dynamic security plugin is missing (looked in %s); it comes with "
        "Debian's mosquitto package: apt-get install -y mosquitto" % ", ".join(DYNSEC_PATHS)
    )


def dynsec_password(password, salt=None, iterations=101):
    """A dynamic-security client's password fields: PBKDF2-SHA512, 64 bytes, base64."""
    salt = os.urandom(12) if salt is None else salt
    digest = hashlib.pbkdf2_hmac("sha512", password.encode(), salt, iterations, 64)
    return {
        "password": base64.b64encode(digest).decode(),
        "salt": base64.b64encode(salt).decode(),
        "iterations": iterations,
    }


class MatrixMosquitto(Broker):
    name = "mosquitto"
    quirks = {
        "overlap": Quirk(
            "first_match",
            "one copy, at the QoS of the first match",
            "delivers one copy of a message that matches several of a client's subscriptions, at the QoS "
            "of the one it finds first in its topic tree (an exact topic's before a wildcard's), which may "
            "be the lower; MQTT-3.3.5-1 asks for the highest",
            "nothing to do on the device: subscribe at the QoS you need with no lower overlapping filter",
        ),
        "keepalive": Quirk(
            "late_drop",
            "drops a silent client late (3-6 s for 1 s)",
            "drops a silent client 3 to 6 s after it went quiet with a 1 s keepalive (it checks keepalives "
            "every few seconds); MQTT-3.1.2-24 says after 1.5 x keepalive",
            "the device finds a dead link itself within keepalive + 100 ms; only the will comes later",
        ),
    }

    def __init__(self, **kw):
        self.binary = find_mosquitto()
        self.dynsec = find_dynsec()
        super().__init__(**kw)

    @property
    def version(self):
        out = subprocess.run([self.binary, "-h"], capture_output=True, text=True).stdout
        return out.split("version", 1)[1].split()[0]  # "mosquitto version 2.0.11"

    def _write_config(self):
        dynsec = os.path.join(self.dir, "dynamic-security.json")
        with open(dynsec, "w") as f:
            json.dump(
                {
                    "defaultACLAccess": {
                        "publishClientSend": True,
                        "publishClientReceive": True,
                        "subscribe": True,
                        "unsubscribe": True,
                    },
                    "clients": [
                        dict(
                            username=self.USER,
                            roles=[{"rolename": "matrix"}],
                            **dynsec_password(self.PASSWORD),
                        )
                    ],
                    "groups": [{"groupname": "anonymous", "roles": [{"rolename": "matrix"}]}],
                    "roles": [
                        {
                            "rolename": "matrix",
                            "acls": [
                                {
                                    "acltype": "subscribePattern",
                                    "topic": self.DENIED_PREFIX + "#",
                                    "priority": 0,
                                    "allow": False,
                                }
                            ],
                        }
                    ],
                    "anonymousGroup": "anonymous",
                },
                f,
            )
        lines = ["# generated by fleetwire.host.brokers.mosquitto"]
        if os.geteuid() == 0:
            lines.append("user root")  # else it switches to user mosquitto, who cannot read the temp dir
        lines += [
            "per_listener_settings false",
            "allow_anonymous true",
            "plugin " + self.dynsec,
            "plugin_opt_config_file " + dynsec,
            "sys_interval 1",
            "log_dest stdout",
            "log_type all",
            "log_timestamp true",
            "listener %d %s" % (self.port, self.host),
        ]
        with open(os.path.join(self.dir, "mosquitto.conf"), "w") as f:
            f.write("\n".join(lines) + "\n")

    def _command(self):
        return [self.binary, "-c", os.path.join(self.dir, "mosquitto.conf")]

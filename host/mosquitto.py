"""A real mosquitto broker on 127.0.0.1 and a free port, for tests, benches and the
demo. Its config, log, persistence store and TLS files live in one temp dir that
outlives stop()/start(), so a restart keeps the port and the stored sessions.
Optional: a TLS listener with a CA generated at start (openssl CLI), a second TLS
listener whose certificate names another host, a password file, inflight/queue limits.
Every broker process is killed at interpreter exit even if the caller forgot."""
import atexit
import base64
import hashlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

HOST = "127.0.0.1"
# Debian installs it in /usr/sbin, which is not on a normal user's PATH.
FALLBACK_PATHS = ("/usr/sbin/mosquitto", "/usr/local/sbin/mosquitto", "/usr/bin/mosquitto")
INSTALL_HINT = "apt-get install -y mosquitto"

_open = set()  # instances not yet close()d: killed and removed at exit


class MosquittoMissing(RuntimeError):
    pass


class MosquittoError(RuntimeError):
    pass


def find_mosquitto():
    """Path of the mosquitto binary: PATH first, then the usual sbin places."""
    for p in (shutil.which("mosquitto"),) + tuple(FALLBACK_PATHS):
        if p and os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    raise MosquittoMissing("mosquitto is not installed (looked on PATH and in %s); install it "
                           "with: %s  (bash tools/run.sh test does it)"
                           % (", ".join(FALLBACK_PATHS), INSTALL_HINT))


def free_port(host=HOST):
    """A port nothing listens on right now (the kernel's pick)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def accepts(host, port, timeout=0.2):
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def hash_password(password, salt=None):
    """A password_file entry in mosquitto's "$6$" form (SHA-512 of password + salt),
    which every 1.x and 2.x broker reads; saves needing mosquitto_passwd."""
    salt = os.urandom(12) if salt is None else salt
    digest = hashlib.sha512(password.encode() + salt).digest()
    return "$6$%s$%s" % (base64.b64encode(salt).decode(), base64.b64encode(digest).decode())


# ---- certificates

# Our own openssl config, so the system openssl.cnf cannot add or clash with
# extensions. The extensions satisfy Python's VERIFY_X509_STRICT (default from
# 3.13) and mbedTLS (MicroPython): CA with keyUsage, leaf with AKI and serverAuth.
_OPENSSL_CNF = """\
[req]
distinguished_name = dn
prompt = no
[dn]
CN = unused
[ca]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign
subjectKeyIdentifier = hash
[server]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = serverAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid:always
subjectAltName = %(san)s
[wrong]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = serverAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid:always
subjectAltName = DNS:%(wrong)s
"""

WRONG_HOSTNAME = "wrong-host.fleetwire.invalid"


class Certs:
    """Paths of the generated files: ca_pem, ca_der, ca_key, server_pem, server_key and
    wrong_pem (signed by the same CA, same key, but only for WRONG_HOSTNAME)."""

    def __init__(self, d):
        for name in ("ca.pem", "ca.der", "ca.key", "server.pem", "server.key", "wrong.pem"):
            setattr(self, name.replace(".", "_"), os.path.join(d, name))


def _openssl(d, *args):
    try:
        r = subprocess.run(["openssl"] + list(args), cwd=d, capture_output=True, text=True,
                           timeout=60)
    except FileNotFoundError:
        raise MosquittoError("the openssl command is needed for TLS: apt-get install -y openssl")
    if r.returncode:
        raise MosquittoError("openssl %s failed:\n%s" % (" ".join(args), r.stderr))


def make_certs(d, hostnames=("localhost",), ips=(HOST,), days=30):
    """A throwaway CA and server certificates in directory d -> Certs."""
    os.makedirs(d, exist_ok=True)
    san = ",".join(["DNS:" + h for h in hostnames] + ["IP:" + i for i in ips])
    with open(os.path.join(d, "openssl.cnf"), "w") as f:
        f.write(_OPENSSL_CNF % {"san": san, "wrong": WRONG_HOSTNAME})
    cnf = ("-config", "openssl.cnf")
    days = ("-days", str(days))
    _openssl(d, "req", *cnf, "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key",
             "-out", "ca.pem", "-subj", "/CN=fleetwire test CA", "-extensions", "ca", *days)
    _openssl(d, "x509", "-in", "ca.pem", "-outform", "DER", "-out", "ca.der")
    _openssl(d, "req", *cnf, "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key",
             "-out", "server.csr", "-subj", "/CN=%s" % (hostnames[0] if hostnames else ips[0]))
    for ext, out in (("server", "server.pem"), ("wrong", "wrong.pem")):
        # Random serials: two certificates from one CA must not share one.
        _openssl(d, "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                 "-set_serial", "0x" + os.urandom(8).hex(), "-extfile", "openssl.cnf",
                 "-extensions", ext, "-out", out, *days)
    return Certs(d)


# ---- the broker

def _die_with_parent():
    # Linux: the broker gets SIGTERM if this process dies without running atexit
    # (SIGKILL, a crash). Only used when started from the main thread, because the
    # kernel ties it to the starting *thread*: a Timer thread that restarts the
    # broker would otherwise take it down when it ends.
    import ctypes
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class Mosquitto:
    """mosquitto on 127.0.0.1. Use `with Mosquitto(...) as b:` or start()/close().

    persistence: True (a store in the temp dir) or a directory path; kept across
        stop()/start()/restart()/kill(). A clean stop() writes the store; after
        kill() only what was last saved survives: snapshot() saves now, autosave
        otherwise (mosquitto's default: every 1800 s, so in effect never).
    tls: also a TLS listener (.tls_port, .ca_pem, .ca_der) and one presenting a
        certificate for another host name (.tls_mismatch_port).
    users: {name: password} written to a password_file; with allow_anonymous=False
        only those may connect.
    max_inflight / max_queued: mosquitto's max_inflight_messages / max_queued_messages.
    extra_config: lines appended after the listeners (so listener options in it
        apply to the last listener).
    """

    def __init__(self, persistence=False, tls=False, max_inflight=None, max_queued=None,
                 users=None, allow_anonymous=True, autosave_interval=None,
                 autosave_on_changes=False, extra_config="", start_timeout=10):
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
        try:
            self.certs = make_certs(os.path.join(self.dir, "tls")) if tls else None
        except BaseException:
            shutil.rmtree(self.dir, ignore_errors=True)
            raise
        self.ca_pem = self.certs.ca_pem if tls else None
        self.ca_der = self.certs.ca_der if tls else None
        self.password_file = None
        if self.users:
            self.password_file = os.path.join(self.dir, "passwords")
            fd = os.open(self.password_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                for name, pw in self.users.items():
                    f.write("%s:%s\n" % (name, hash_password(pw)))
        self.proc = None
        self._pick_ports()
        self._closed = False
        _open.add(self)

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
        lines = ["# generated by fleetwire.host.mosquitto"]
        if os.geteuid() == 0:
            # As root, mosquitto would switch to user "mosquitto", which cannot
            # read or write this private temp dir.
            lines.append("user root")
        lines += [
            "per_listener_settings false",
            "allow_anonymous %s" % ("true" if self.allow_anonymous else "false"),
            "log_dest file %s" % self.log_path,
            "log_type all",
            "log_timestamp true",
            "connection_messages true",
        ]
        if self.password_file:
            lines.append("password_file %s" % self.password_file)
        if self.persistence_dir:
            lines += ["persistence true",
                      # 1.x joins location and file name as is; 2.x adds its own "/"
                      "persistence_location %s/" % self.persistence_dir.rstrip("/"),
                      "persistence_file mosquitto.db"]
            if self.autosave_interval is not None:
                lines.append("autosave_interval %d" % self.autosave_interval)
            if self.autosave_on_changes:
                lines.append("autosave_on_changes true")
        if self.max_inflight is not None:
            lines.append("max_inflight_messages %d" % self.max_inflight)
        if self.max_queued is not None:
            lines.append("max_queued_messages %d" % self.max_queued)
        lines.append("listener %d %s" % (self.port, self.host))
        if self.tls:
            c = self.certs
            for port, cert in ((self.tls_port, c.server_pem), (self.tls_mismatch_port, c.wrong_pem)):
                lines += ["listener %d %s" % (port, self.host), "cafile %s" % c.ca_pem,
                          "certfile %s" % cert, "keyfile %s" % c.server_key]
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
            kw["preexec_fn"] = _die_with_parent
        with open(self._stderr_path, "ab") as err:
            self.proc = subprocess.Popen([self.binary, "-c", self.config_path],
                                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=err, cwd=self.dir, **kw)
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
                raise MosquittoError("mosquitto did not listen on %s:%s within %s s:\n%s"
                                     % (self.host, waiting, timeout, self._tail()))
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
                raise AssertionError("%r not %d time(s) in the mosquitto log within %s s; log ends:\n%s"
                                     % (text, count, timeout, "\n".join(log.splitlines()[-20:])))
            time.sleep(0.02)

    def close(self):
        """Stop and delete the temp dir (config, log, store, certificates)."""
        self.stop()
        self._closed = True
        _open.discard(self)
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return "<Mosquitto %s:%s%s %s>" % (self.host, self.port,
                                           " tls:%s" % self.tls_port if self.tls else "",
                                           "running" if self.running else "stopped")


@atexit.register
def _cleanup():
    for b in list(_open):
        b.kill()
        shutil.rmtree(b.dir, ignore_errors=True)

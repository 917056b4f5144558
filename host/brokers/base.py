"""What every broker of the matrix is: a real broker process on 127.0.0.1 and a free
port, with its config and log in a temp dir of its own, started and stopped by the
caller. Subclasses say how to configure and launch it (`_write_config`, `_command`,
`_env`) and what it does differently from MQTT 3.1.1 (`quirks`)."""

import atexit
import collections
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

from fleetwire.host import Missing

HOST = "127.0.0.1"

_open = set()  # brokers not yet close()d: killed and removed at exit


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


# What a broker does instead of MQTT 3.1.1 for one feature: `tag` is what the tests test
# for, `label` the matrix table's cell, `does` what it does and what the standard says,
# `fleetwire` what fleetwire does about it (sentences of docs/reference/brokers.md).
Quirk = collections.namedtuple("Quirk", "tag label does fleetwire")


class BrokerMissing(Missing):
    """The broker's program is not installed here (the message says how to install it)."""


class BrokerError(RuntimeError):
    """The broker did not start, or stopped while starting (the message has its log's tail)."""


def die_with_parent():
    # Linux: the broker's first process gets SIGTERM if the test process dies without
    # running atexit; only from the main thread (the kernel ties it to the thread).
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class Owned:
    """A broker process this interpreter started, with its files in a temp dir of its own
    (self.dir): close() stops it and removes the dir, and whatever is still open at exit is
    killed and removed even if nobody closed it. Subclasses call own() once set up and
    provide stop() and kill()."""

    def own(self):
        self._closed = False
        _open.add(self)

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


class Broker(Owned):
    """One broker of the matrix. `with make("aedes") as b:` or start()/close().

    name, host, port, address: where it listens (plain MQTT, loopback only).
    version: the installed broker's version, as it reports it.
    quirks: {feature key: Quirk}, what this broker does instead of what MQTT 3.1.1 says;
        the keys are fleetwire.host.brokers.FEATURES'. quirk(key) -> its tag or None.
    DENIED_PREFIX: every matrix broker refuses a subscription to a filter under it
        (SUBACK 0x80) by its own access control, so tests can see a refusal.
    USER, PASSWORD: a login every matrix broker accepts (.login as keyword arguments).
        Clients of the matrix log in, as a fleet's devices do: amqtt keeps no messages
        for the persistent session of an anonymous client.
    """

    name = "?"
    quirks = {}
    start_timeout = 15
    DENIED_PREFIX = "fw/denied/"
    USER = "fleetwire"
    PASSWORD = "fleetwire-matrix"

    def __init__(self, start_timeout=None):
        self.host = HOST
        self.dir = tempfile.mkdtemp(prefix="fleetwire-%s-" % self.name)
        self.log_path = os.path.join(self.dir, "broker.log")
        if start_timeout is not None:
            self.start_timeout = start_timeout
        self.proc = None
        self.port = free_port()
        self.own()

    # ---- what subclasses provide

    def _write_config(self):
        """Write whatever config files the broker reads into self.dir."""

    def _command(self):
        raise NotImplementedError

    def _env(self):
        return dict(os.environ)

    @property
    def version(self):
        raise NotImplementedError

    # ---- common

    @property
    def address(self):
        return (self.host, self.port)

    @property
    def running(self):
        return self.proc is not None and self.proc.poll() is None

    @property
    def login(self):
        return {"user": self.USER, "password": self.PASSWORD}

    def quirk(self, key):
        """The tag of what this broker does instead of the standard for feature `key`, or
        None where it follows the standard."""
        q = self.quirks.get(key)
        return q.tag if q else None

    # What a client sees, from the quirks (the tests' expectations).

    def grants(self, asked):
        """The QoS this broker grants a subscription that asked for `asked`."""
        return min(asked, 1) if self.quirk("qos_in") == "max_qos1" else asked

    def delivers_at(self, qos, granted):
        """The QoS a message published at `qos` arrives at, on a subscription granted `granted`."""
        q = self.quirk("qos_in")
        if q == "no_downgrade":
            return qos
        if q == "granted_qos":
            return granted
        return min(qos, granted)

    def takes_at(self, qos):
        """The QoS this broker takes a client's PUBLISH at."""
        return 1 if qos == 2 and self.quirk("qos_out") == "qos2_puback" else qos

    def start(self, timeout=None):
        """Start (again, on the same port); returns self once the port accepts connections."""
        if self._closed:
            raise BrokerError("this %s broker was closed" % self.name)
        if self.running:
            return self
        timeout = self.start_timeout if timeout is None else timeout
        self._write_config()
        kw = {}
        if sys.platform.startswith("linux") and threading.current_thread() is threading.main_thread():
            kw["preexec_fn"] = die_with_parent
        with open(self.log_path, "ab") as log:
            # Its own process group, so stop() reaches every process it starts.
            self.proc = subprocess.Popen(
                self._command(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.dir,
                env=self._env(),
                start_new_session=True,
                **kw,
            )
        deadline = time.monotonic() + timeout
        while not accepts(self.host, self.port):
            if self.proc.poll() is not None:
                rc = self.proc.returncode
                self._signal(signal.SIGKILL)
                self.proc = None
                raise BrokerError(
                    "%s exited with %s while starting; its log ends:\n%s" % (self.name, rc, self.log_tail())
                )
            if time.monotonic() > deadline:
                self.kill()
                raise BrokerError(
                    "%s did not listen on %s:%s within %s s; its log ends:\n%s"
                    % (self.name, self.host, self.port, timeout, self.log_tail())
                )
            time.sleep(0.05)
        return self

    def _signal(self, sig):
        try:
            os.killpg(self.proc.pid, sig)  # the group we created: the broker and its helpers
        except ProcessLookupError:
            pass

    def stop(self, timeout=15):
        """Clean shutdown (SIGTERM to the broker's process group)."""
        p = self.proc
        if p is not None:
            if p.poll() is None:
                self._signal(signal.SIGTERM)
                try:
                    p.wait(timeout)
                except subprocess.TimeoutExpired:
                    pass
            self._signal(signal.SIGKILL)  # helpers left behind (e.g. an Erlang epmd)
            p.wait()
        self.proc = None

    def kill(self):
        """A crash (SIGKILL to the whole group)."""
        if self.proc is not None:
            self._signal(signal.SIGKILL)
            self.proc.wait()
        self.proc = None

    def log_text(self):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def log_tail(self, n=40):
        return "\n".join(self.log_text().splitlines()[-n:])

    def __repr__(self):
        return "<%s %s:%s %s>" % (self.name, self.host, self.port, "running" if self.running else "stopped")


@atexit.register
def _cleanup():
    for b in list(_open):
        b.kill()
        shutil.rmtree(b.dir, ignore_errors=True)

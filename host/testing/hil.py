"""Hardware-in-the-loop fixtures (a pytest plugin): the same tests run on a real board
(`pytest --board /dev/ttyUSB0 --board-broker 192.168.1.10:8883 --board-ca ~/.fleetwire/ca`)
or, without --board, on a virtual board the fixture starts (the MicroPython unix port
behind a pty, fleetwire.host.rig.vboard) against a mosquitto on loopback that enforces fleet
identity (mutual TLS, the ACL and CRL of `fleetwire broker-config`).

Fixtures:
  hil_board     a Board: deploy(config) (with the fleet CA, the board gets its own key and
                certificate), put(name, text), exec(code), console_until(regex), and on a
                virtual board set_wlan(up) and power_cycle()
  hil_broker    (host, port) the board publishes to
  hil_ca        the fleet CA the broker trusts (fleetwire.host.identity.pki.FleetCA), or None on a real
                board without --board-ca (a broker without identity, then)
  hil_observer  a paho-mqtt Observer on that broker, logged in as the operator
"""

import os
import subprocess
import sys
import time

import pytest


def pytest_addoption(parser):
    g = parser.getgroup("fleetwire HIL")
    g.addoption("--board", default=None, help="serial port of a real board for the HIL tests")
    g.addoption(
        "--board-broker",
        default=None,
        help="HOST:PORT of a broker the real board can reach (needed with --board)",
    )
    g.addoption(
        "--board-wifi-ssid",
        default=None,
        help="Wi-Fi network the real board joins (written to its config.json); without it the "
        "board is expected to be on the network already",
    )
    g.addoption(
        "--board-wifi-password",
        default=os.environ.get("FLEETWIRE_WIFI_PASSWORD", ""),
        help="its password (default: $FLEETWIRE_WIFI_PASSWORD, which keeps it out of shell history)",
    )
    g.addoption(
        "--board-ca",
        default=None,
        metavar="DIR",
        help="the fleet CA the --board-broker trusts (fleetwire ca init; its broker from fleetwire "
        "broker-config): the board gets a certificate of its own, the observer logs in as "
        "`operator`; without it the real board's broker is taken to need no identity",
    )
    g.addoption(
        "--board-heap",
        default="128K",
        help="heap of the virtual board (default 128K: fleetwire as .mpy in RAM; frozen it needs less)",
    )


class Board:
    """A board behind a serial port, driven with mpremote."""

    def __init__(self, port, vboard=None, ca=None):
        self.port = port
        self.vboard = vboard
        self.ca = ca
        self._watches = []
        self._boot = False  # deployed, not yet started: the next console read starts it

    def close(self):
        for w in self._watches:
            w.stop()

    @property
    def virtual(self):
        return self.vboard is not None

    def deploy(self, config, rotate=False, log=None, release_keys=None):
        """Deploy as `fleetwire deploy --mpy [--ca DIR] [--release-keys DIR] --no-reset` does ->
        its result. The program starts at the next console_until() or watch(), which open the
        port first and then soft-reset the board (as `fleetwire console --reset`): a reset at
        the end of the deploy let the board print its first lines before anyone read them."""
        from fleetwire.host.rig.deploy import deploy

        res = deploy(
            self.port,
            config,
            mpy=True,
            log=log or (lambda m: None),
            ca=self.ca and self.ca.dir,
            rotate=rotate,
            release_keys=release_keys,
            reset=False,
        )
        self._boot = True
        return res

    def _take_boot(self):
        boot, self._boot = self._boot, False
        return boot

    def exec(self, code, timeout=30):
        r = subprocess.run(
            [sys.executable, "-m", "mpremote", "connect", self.port, "resume", "exec", code],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if r.returncode:
            raise AssertionError("mpremote exec failed: %s" % (r.stderr or r.stdout)[-500:])
        return r.stdout

    def put(self, name, text):
        """Write a file on the board (mpremote fs cp)."""
        import tempfile

        with tempfile.NamedTemporaryFile("w", suffix="-" + os.path.basename(name), delete=False) as f:
            f.write(text)
        try:
            r = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "mpremote",
                    "connect",
                    self.port,
                    "resume",
                    "fs",
                    "cp",
                    f.name,
                    ":" + name,
                ],
                capture_output=True,
                text=True,
                timeout=30,
            )
            if r.returncode:
                raise AssertionError("mpremote cp failed: %s" % r.stderr[-500:])
        finally:
            os.unlink(f.name)

    def reset(self):
        subprocess.run(
            [sys.executable, "-m", "mpremote", "connect", self.port, "resume", "reset"],
            capture_output=True,
            timeout=30,
        )

    def console_until(self, pattern, timeout=30):
        """Read the console until a line matches -> the lines read (fails at timeout)."""
        import io
        from fleetwire.host.rig.console import console

        buf = io.StringIO()
        hit = console(self.port, until=pattern, timeout=timeout, out=buf, wait=True, reset=self._take_boot())
        assert hit is not None, "no line matching %r within %s s; console said:\n%s" % (
            pattern,
            timeout,
            buf.getvalue()[-3000:],
        )
        return buf.getvalue()

    def watch(self):
        """Read the console from now on, in the background (a board drops output nobody reads)
        -> a ConsoleWatch; stopped with the board. Not while deploying: mpremote needs the port."""
        w = ConsoleWatch(self.port, reset=self._take_boot())
        self._watches.append(w)
        return w

    def set_wlan(self, up):
        if not self.virtual:
            pytest.skip("Wi-Fi on demand needs a virtual board")
        self.vboard.set_wlan(up)

    def power_cycle(self):
        if not self.virtual:
            pytest.skip("cutting the power needs a virtual board")
        self.vboard.power_cycle()


class ConsoleWatch:
    """The console's lines, read by a thread: wait_for(regex) -> the text so far once a line
    matches (fails at timeout); .text is everything read."""

    def __init__(self, port, reset=False):
        import re
        import threading

        self._re = re
        self.lines = []
        self._stop = threading.Event()
        self._cv = threading.Condition()
        self._t = threading.Thread(target=self._read, args=(port, reset), daemon=True)
        self._t.start()

    def _read(self, port, reset):
        import serial

        from fleetwire.host.rig.console import STOP_AND_SOFT_RESET

        buf = b""
        while not self._stop.is_set():
            try:
                with serial.Serial(port, 115200, timeout=0.2) as s:
                    if reset:  # once the port is open: every line from boot on is read
                        s.write(STOP_AND_SOFT_RESET)
                        s.flush()
                        reset = False
                    while not self._stop.is_set():
                        buf += s.read(512)
                        while b"\n" in buf:
                            line, buf = buf.split(b"\n", 1)
                            with self._cv:
                                self.lines.append(line.rstrip(b"\r").decode("utf-8", "replace"))
                                self._cv.notify_all()
            except (serial.SerialException, OSError):
                time.sleep(0.2)  # the board resets: its port comes back

    @property
    def text(self):
        with self._cv:
            return "\n".join(self.lines)

    def wait_for(self, pattern, timeout=30):
        rx = self._re.compile(pattern)
        with self._cv:
            if not self._cv.wait_for(lambda: any(rx.search(x) for x in self.lines), timeout):
                raise AssertionError(
                    "no console line matching %r within %s s; console said:\n%s"
                    % (pattern, timeout, "\n".join(self.lines)[-3000:])
                )
            return "\n".join(self.lines)

    def stop(self):
        self._stop.set()
        self._t.join(2)


@pytest.fixture
def hil_ca(request):
    if request.config.getoption("--board"):
        d = request.config.getoption("--board-ca")
        if not d:
            return None
        from fleetwire.host.identity.pki import FleetCA

        return FleetCA(d)
    return request.getfixturevalue("fleet_ca")


@pytest.fixture
def hil_broker(request):
    opt = request.config.getoption("--board-broker")
    if opt:
        host, _, port = opt.rpartition(":")
        return host, int(port)
    if request.config.getoption("--board"):
        pytest.fail("--board needs --board-broker HOST:PORT: a real board cannot reach this host's loopback")
    b = request.getfixturevalue("identity_mosquitto")
    return "localhost", b.port  # the name in the broker's certificate, which the board checks


@pytest.fixture
def hil_board(request, tmp_path, hil_ca):
    yield from board(request, tmp_path, hil_ca, request.config.getoption("--board-heap"))


def board(request, tmp_path, ca, heap, **vboard):
    """A fixture's Board: the real one of --board, else a virtual board with this heap (and
    VirtualBoard's other options), stopped afterwards."""
    port = request.config.getoption("--board")
    if port:
        b = Board(port, ca=ca)
        yield b
        b.close()
        return
    from fleetwire.host.rig.vboard import VirtualBoard, wait_for_prompt

    vb = VirtualBoard(str(tmp_path / "vboard"), heap=heap, **vboard).start()
    b = None
    try:
        assert wait_for_prompt(vb.port), "the virtual board gave no prompt"
        b = Board(vb.port, vb, ca=ca)
        yield b
    finally:
        if b is not None:
            b.close()
        vb.stop()


@pytest.fixture
def hil_observer(request, hil_broker, hil_ca, tmp_path_factory):
    """An Observer on the board's broker; with a fleet CA it logs in as `operator` (reads
    fleet/#, publishes commands)."""
    from fleetwire.host.testing.observer import Observer

    kw = {}
    if hil_ca is not None:
        if request.config.getoption("--board"):
            cert, key = hil_ca.credentials(
                "operator", "operator", str(tmp_path_factory.mktemp("hil-operator"))
            )
        else:
            cert, key = request.getfixturevalue("host_credentials")("operator")
        kw = dict(tls_ca=hil_ca.cert_path, tls_cert=cert, tls_key=key)
    o = Observer(hil_broker[0], hil_broker[1], **kw)
    yield o
    o.close()


def device_config(request, broker, **kw):
    """A config.json for the board under test: a device id of its own, the broker, and
    Wi-Fi: --board-wifi-ssid/--board-wifi-password on a real board (none given: the
    board is on the network already), a made-up network on a virtual one (its emulated
    WLAN joins any)."""
    opt = request.config.getoption
    cfg = {
        "device_id": "hil-%s-%d" % (request.node.name[:24].replace("[", "-").strip("]"), os.getpid()),
        "broker": broker[0],
        "port": broker[1],
        "period_s": 1,
        "fw_version": "hil",
    }
    if not opt("--board"):
        cfg.update(wifi_ssid="hil-lab", wifi_password="hil-secret")
    elif opt("--board-wifi-ssid"):
        cfg.update(wifi_ssid=opt("--board-wifi-ssid"), wifi_password=opt("--board-wifi-password"))
    cfg.update(kw)
    return cfg


def wait(cond, timeout=20, step=0.05):
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            return False
        time.sleep(step)
    return True

"""Board certificates renewed over the air: the board program (firmware/main.py, the runner,
on the MicroPython unix port with the board's .mpy tree) with "cert_renew_days" in its
config.json, the issuer (`fleetwire ca serve`'s IssuerService, logged in as the operator)
and a mosquitto that enforces fleet identity (`fleetwire broker-config`'s lines, the fleet
CA's CRL). A board asks before its certificate expires or when ordered, tries the new one
in a connection before it switches, and the old one is revoked once it has."""

import datetime
import json
import os
import queue
import re
import shutil
import subprocess
import threading
import time

import pytest
from cryptography import x509

from fleetwire.host.identity import pki
from fleetwire.host.identity.issuer import IssuerService, order
from support import device_command

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MAIN = os.path.join(ROOT, "firmware", "main.py")
HEAP = "160K"  # the board program with mutual TLS and a store, on the 64-bit port (as test_ota_loading)

pytestmark = pytest.mark.micropython


class Board:
    """The board program running in DIR (its file system), its console read line by line."""

    def __init__(self, board_lib, where, cfg):
        self.dir = where
        cmd, env = device_command("micropython", board_lib, "main.py")
        cmd[cmd.index("-X") + 1] = "heapsize=" + HEAP
        shutil.copy(MAIN, os.path.join(where, "main.py"))
        with open(os.path.join(where, "config.json"), "w") as f:
            json.dump(cfg, f)
        self.p = subprocess.Popen(
            cmd, cwd=where, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        self.lines = []
        self._q = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.p.stdout:
            self._q.put(line.rstrip("\n"))
        self._q.put(None)

    def wait_for(self, text, timeout=60):
        end = time.monotonic() + timeout
        for line in self.lines:
            if text in line:
                return line
        while time.monotonic() < end:
            try:
                line = self._q.get(timeout=0.2)
            except queue.Empty:
                continue
            if line is None:
                raise AssertionError("the board stopped before %r:\n%s" % (text, "\n".join(self.lines)))
            self.lines.append(line)
            if text in line:
                return line
        raise AssertionError("no %r within %s s:\n%s" % (text, timeout, "\n".join(self.lines)))

    def said(self):
        """Every line so far."""
        while True:
            try:
                line = self._q.get_nowait()
            except queue.Empty:
                return self.lines
            if line is not None:
                self.lines.append(line)

    def cert(self):
        with open(os.path.join(self.dir, "tls", "cert.der"), "rb") as f:
            return x509.load_der_x509_certificate(f.read())

    def leftovers(self):
        return sorted(f for f in os.listdir(os.path.join(self.dir, "tls")) if f.endswith((".new", ".old")))

    def stop(self):
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait(10)


@pytest.fixture
def boards(board_lib, identity_mosquitto, tmp_path):
    """boards(device_id, issued, **cfg) -> a running Board with `issued` (pki.Issued) as its
    identity in tls/, as `fleetwire deploy --ca` writes it; stopped afterwards."""
    made = []

    def make(device_id, issued, app=None, **cfg):
        where = tmp_path / device_id
        os.makedirs(where / "tls")
        if app is not None:
            (where / "app.py").write_text(app)
        shutil.copy(identity_mosquitto.ca_der, str(where / "tls" / "ca.der"))
        (where / "tls" / "cert.der").write_bytes(pki.der(issued.cert))
        pki.write_private(str(where / "tls" / "key.der"), pki.key_der(issued.key))
        os.makedirs(where / "store")
        c = dict(
            device_id=device_id,
            broker="localhost",
            port=identity_mosquitto.port,
            tls_ca="tls/ca.der",
            tls_cert="tls/cert.der",
            tls_key="tls/key.der",
            period_s=1,
            cert_renew_days=30,
        )
        c.update(cfg)
        b = Board(str(board_lib), str(where), c)
        made.append(b)
        return b

    yield make
    for b in made:
        b.stop()


@pytest.fixture
def issuer(fleet_ca, identity_mosquitto, host_credentials):
    cert, key = host_credentials("operator")
    with IssuerService(
        fleet_ca,
        identity_mosquitto.host,
        identity_mosquitto.port,
        identity_mosquitto.ca_pem,
        cert,
        key,
        on_revoke=identity_mosquitto.reload,  # the broker reads the new CRL
        client_id="issuer-%d" % os.getpid(),
        log=lambda m: None,
    ) as s:
        yield s


def telemetry(observer, device_id):
    return [m for m in observer.messages if m[0] == "fleet/%s/telemetry" % device_id]


def refused(identity_mosquitto, tmp_path, issued, name):
    """Whether the broker refuses a client that shows issued's certificate now."""
    from fleetwire.host.testing.observer import Observer

    cert, key = pki.write_credentials(issued, str(tmp_path / ("creds-" + name)))
    try:
        Observer(
            identity_mosquitto.host,
            identity_mosquitto.port,
            tls_ca=identity_mosquitto.ca_pem,
            tls_cert=cert,
            tls_key=key,
            timeout=3,
        ).close()
    except AssertionError:
        return True
    return False


def _renewed_and_revoked(board, issuer, fleet_ca, old, make_observer, identity_mosquitto, tmp_path):
    me = pki.common_name(old.cert)
    board.wait_for("renew: switched to the new certificate")
    issuer.wait(lambda ev: ("revoked", me, "serial %s (ok)" % pki.serial_hex(old.cert)) in ev)
    new = board.cert()
    assert pki.serial_hex(new) != pki.serial_hex(old.cert) and pki.common_name(new) == me
    assert pki.signed_by(new, fleet_ca.cert) and not fleet_ca.revoked(new)
    assert new.public_key().public_numbers() == old.key.public_key().public_numbers()  # the key it kept
    assert board.leftovers() == []
    assert fleet_ca.revoked(old.cert)
    # the broker refuses the old certificate from now on; the board goes on with the new one
    assert refused(identity_mosquitto, tmp_path, old, "old")
    obs = make_observer(identity_mosquitto)
    obs.subscribe("fleet/%s/telemetry" % me, 1)
    obs.wait_until(lambda m: len(telemetry(obs, me)) >= 2, timeout=30)
    return new


def test_a_board_renews_its_certificate_before_it_expires_and_the_old_one_is_revoked(
    boards, issuer, fleet_ca, make_observer, identity_mosquitto, tmp_path
):
    # valid 10 days, renewed 30 days before the end: due at once
    old = fleet_ca.issue("renew-due", days=10)
    board = boards("renew-due", old)
    board.wait_for("renew: asked for a new certificate (serial %s" % pki.serial_hex(old.cert))
    new = _renewed_and_revoked(board, issuer, fleet_ca, old, make_observer, identity_mosquitto, tmp_path)
    left = pki.not_after(new) - datetime.datetime.now(datetime.timezone.utc)
    assert datetime.timedelta(days=pki.LEAF_DAYS - 1) < left <= datetime.timedelta(days=pki.LEAF_DAYS)


def test_a_board_renews_its_certificate_when_the_operator_orders_it(
    boards, issuer, fleet_ca, make_observer, identity_mosquitto, host_credentials, tmp_path
):
    old = fleet_ca.issue("renew-order")  # two years: not due
    op = make_observer(identity_mosquitto)
    op.subscribe("fleet/renew-order/telemetry", 1)
    board = boards("renew-order", old)
    # its records follow its subscription to fleet/renew-order/cert/# on the connection
    op.wait_until(lambda m: len(telemetry(op, "renew-order")) >= 2, timeout=60)
    said = board.said()
    assert "main: connected to localhost" in said and not any("renew:" in x for x in said), said  # not due
    cert, key = host_credentials("operator")
    b = identity_mosquitto
    order(["renew-order"], b.host, b.port, b.ca_pem, cert, key)  # `fleetwire ca order renew-order`
    board.wait_for("renew: ordered by the operator")
    _renewed_and_revoked(board, issuer, fleet_ca, old, make_observer, identity_mosquitto, tmp_path)


def test_a_request_for_another_device_id_is_refused_with_the_reason(
    issuer, fleet_ca, make_observer, identity_mosquitto
):
    # a board that sends another board's certificate, on its own topic (the only one it may use)
    victim = fleet_ca.issue("renew-victim")
    rogue = make_observer(identity_mosquitto, identity=("renew-rogue", "device"))
    rogue.subscribe("fleet/renew-rogue/cert/#", 1)
    n = len(fleet_ca.index())
    rogue.publish("fleet/renew-rogue/cert_req", pki.der(victim.cert), qos=1)
    got = rogue.wait_until(lambda m: any(t == "fleet/renew-rogue/cert/refused" for t, *_ in m))
    why = [p for t, p, *_ in got if t.endswith("/refused")][0].decode()
    assert "carries the certificate of 'renew-victim': a board renews only its own" in why
    assert not any(t.endswith("/cert/new") for t, *_ in got)
    assert len(fleet_ca.index()) == n  # nothing issued
    issuer.wait(lambda ev: any(e[:2] == ("refused", "renew-rogue") for e in ev))


def test_a_failed_test_connection_keeps_the_old_certificate(
    boards, fleet_ca, make_observer, identity_mosquitto, tmp_path
):
    # an issuer the broker does not trust (another CA of the same name) answers the request:
    # the new certificate is for the board's key and name, and the broker refuses it
    other = pki.FleetCA.create(str(tmp_path / "other-ca"), fleet_ca.name)
    old = fleet_ca.issue("renew-bad", days=10)
    op = make_observer(identity_mosquitto)
    op.subscribe("fleet/renew-bad/#", 1)
    board = boards("renew-bad", old)
    got = op.wait_until(lambda m: any(t == "fleet/renew-bad/cert_req" for t, *_ in m))
    assert [p for t, p, *_ in got if t.endswith("cert_req")][0] == pki.der(old.cert)
    forged = pki.sign(other.key, other.cert, "renew-bad", old.key.public_key())
    op.publish("fleet/renew-bad/cert/new", pki.der(forged), qos=1)
    line = board.wait_for("renew: kept the old certificate")
    assert pki.serial_hex(forged) in line and "the test connection failed" in line
    # it told the issuer, and went on under its old certificate
    said = op.wait_until(lambda m: any(x[0] == "fleet/renew-bad/cert_ok" for x in m))
    w = [x[1] for x in said if x[0] == "fleet/renew-bad/cert_ok"][0].split()
    assert w[0] == b"bad" and int(w[1], 16) == forged.serial_number
    assert pki.der(board.cert()) == pki.der(old.cert) and board.leftovers() == []
    n = len(telemetry(op, "renew-bad"))
    op.wait_until(lambda m: len(telemetry(op, "renew-bad")) >= n + 2, timeout=30)
    assert not fleet_ca.revoked(old.cert)


# An app that says which fleetwire modules are loaded once set up, and in the main loop
LOADED = """import sys
def _loaded():
    return " ".join(sorted(k[10:] for k in sys.modules if k.startswith("fleetwire.")))
def setup(client):
    print("STEP setup", _loaded())
def step(client):
    print("STEP loop", _loaded())
    raise SystemExit(0)
"""


@pytest.mark.parametrize("renewal", [False, True])
def test_renewal_loads_its_watch_only_when_on_and_its_work_only_while_it_runs(boards, fleet_ca, renewal):
    issued = fleet_ca.issue("renew-load-%d" % renewal)
    board = boards(issued.name, issued, app=LOADED, **({} if renewal else {"cert_renew_days": None}))
    board.p.wait(60)
    setup = set(board.wait_for("STEP setup").split()[2:])
    loop = set(board.wait_for("STEP loop").split()[2:])
    # the watch settles a switch a power cut interrupted, at boot; the work is not loaded
    assert setup & {"tls.watch", "tls.renew", "tls.check"} == ({"tls.watch"} if renewal else set())
    # on: the resident watch, and nothing of the work (it ran, to know when renewal is due, and went)
    assert loop & {"tls.watch", "tls.renew", "tls.check"} == ({"tls.watch"} if renewal else set())


def test_a_power_cut_at_every_flash_step_of_the_switch_leaves_a_working_identity(
    board_lib, fleet_ca, identity_mosquitto, tmp_path
):
    # cert_cut_program.py: LittleFS on an emulated NOR flash, a cut at every program and erase
    # of the switch (clean, and half-way), then the boot; the board connects to the broker
    from fleetwire.host.portable import PATH as PORTABLE
    from fleetwire.host.rig import micropython

    old = fleet_ca.issue("renew-cut")
    new = pki.sign(fleet_ca.key, fleet_ca.cert, "renew-cut", old.key.public_key())
    files = {"old.der": pki.der(old.cert), "new.der": pki.der(new), "key.der": pki.key_der(old.key)}
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    env = dict(os.environ)
    env["MICROPYPATH"] = os.pathsep.join([PORTABLE, str(board_lib), ".frozen"])
    b = identity_mosquitto
    r = subprocess.run(
        [
            micropython.binary(),
            "-X",
            "heapsize=1M",
            os.path.join(os.path.dirname(__file__), "cert_cut_program.py"),
        ]
        + [str(tmp_path / n) for n in ("old.der", "new.der", "key.der")]
        + [b.ca_der, "localhost", str(b.port), "renew-cut"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=str(tmp_path),
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    m = re.search(r"done ops=(\d+) cuts=(\d+) old=(\d+) new=(\d+)", r.stdout)
    assert m, r.stdout[-2000:]
    ops, cuts, on_old, on_new = (int(x) for x in m.groups())
    assert ops >= 3 and cuts == 2 * ops  # the new file, the renames, the old one's removal
    assert on_old + on_new == cuts and on_old and on_new  # before the switch the old, after it the new


def test_a_certificate_the_board_cannot_read_or_another_boards_is_not_tried_and_the_old_one_stays(
    boards, fleet_ca, make_observer, identity_mosquitto
):
    old = fleet_ca.issue("renew-junk")
    op = make_observer(identity_mosquitto)
    op.subscribe("fleet/renew-junk/#", 1)
    board = boards("renew-junk", old)
    # its first record follows its subscription to fleet/renew-junk/cert/# on the connection
    op.wait_until(lambda m: telemetry(op, "renew-junk"), timeout=60)
    op.publish("fleet/renew-junk/cert/new", b"\x30\x82\x01\x00 not a certificate", qos=1)
    assert "not a DER certificate" in board.wait_for("renew: kept the old certificate")
    other = fleet_ca.issue("renew-someone-else", record=False)
    op.publish("fleet/renew-junk/cert/new", pki.der(other.cert), qos=1)
    line = board.wait_for("its subject is not this board's")
    assert "renew: kept the old certificate" in line
    assert pki.der(board.cert()) == pki.der(old.cert) and board.leftovers() == []
    n = len(telemetry(op, "renew-junk"))
    op.wait_until(lambda m: len(telemetry(op, "renew-junk")) >= n + 2, timeout=30)
    assert not any("main: reconnecting" in x or "Traceback" in x for x in board.said()), board.lines

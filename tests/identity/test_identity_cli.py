"""The operator's commands, as typed: `fleetwire ca`, `fleetwire broker-config`, `fleetwire deploy
--ca` and `fleetwire collect` with certificates, against the real mosquitto started from the
configuration broker-config wrote and a virtual board. No private key ever appears in what
any of them prints or logs; bad input is refused before anything reaches the board."""

import base64
import os
import signal
import subprocess
import sys

import pytest

from fleetwire.host.identity import pki
from fleetwire.host.brokers.mosquitto import find_mosquitto, free_port
from fleetwire.host.rig.vboard import VirtualBoard, wait_for_prompt
from fleetwire.host.testing.hil import wait


def cli(*args, timeout=120):
    return subprocess.run(
        [sys.executable, "-m", "fleetwire.tools.cli"] + [str(a) for a in args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def key_forms(key):
    """The ways a private key could leak into text: its PEM lines, its DER in hex and base64,
    its private numbers (EC: the scalar; RSA: d, p and q) in hex and decimal."""
    der = pki.key_der(key)
    body = [line for line in pki.key_pem(key).decode().splitlines() if line and not line.startswith("-----")]
    p = key.private_numbers()
    secrets = [p.private_value] if hasattr(p, "private_value") else [p.d, p.p, p.q]
    return body + [der.hex(), base64.b64encode(der).decode()] + [f % n for n in secrets for f in ("%x", "%d")]


def board_keys_seq(vb):
    """The number of the release-key set a virtual board holds (ota/keys.json)."""
    import json

    try:
        with open(os.path.join(vb.fs, "ota", "keys.json")) as f:
            return json.load(f)["seq"]
    except (OSError, ValueError):
        return None


def console_until(port, pattern, timeout=90):  # a deadline (a loaded machine took 30 s)
    """The board reset by the console once it listens (deploy --no-reset), so that a board
    quicker than a loaded machine's console cannot print the line before it is read."""
    import io
    from fleetwire.host.rig.console import console

    buf = io.StringIO()
    hit = console(port, until=pattern, timeout=timeout, out=buf, wait=True, reset=True)
    assert hit is not None, buf.getvalue()[-2000:]
    return buf.getvalue()


def test_the_operators_commands_never_print_a_key(tmp_path):
    ca_dir, creds, brk = tmp_path / "ca", tmp_path / "creds", tmp_path / "broker"
    said = []  # everything every command printed, and every log

    def run(*args):
        r = cli(*args)
        said.append(r.stdout + r.stderr)
        assert r.returncode == 0, r.stdout + r.stderr
        return r.stdout

    out = run("ca", "init", "--ca", ca_dir)
    assert "ca.key" in out and oct(os.stat(ca_dir / "ca.key").st_mode & 0o777) == "0o600"
    run("ca", "issue", "collector", "--role", "collector", "--out", creds, "--ca", ca_dir)
    run("ca", "issue", "operator", "--role", "operator", "--out", creds, "--ca", ca_dir)
    # the release-signing keys: apart from the CA's, each in a file of mode 600
    rel_dir = tmp_path / "release"
    out = run("release", "init", "--dir", rel_dir)
    k1 = out.split()[2]  # "release-signing key ID made in DIR"
    assert "made in %s" % rel_dir in out and oct(os.stat(rel_dir / (k1 + ".key")).st_mode & 0o777) == "0o600"
    assert not os.path.exists(ca_dir / (k1 + ".key"))
    port = free_port()
    user = ["--user", "root"] if os.geteuid() == 0 else []  # as root mosquitto would drop to another user
    run(
        "broker-config",
        "--ca",
        ca_dir,
        "--host",
        "localhost",
        "--host",
        "127.0.0.1",
        "--port",
        port,
        "--bind",
        "127.0.0.1",
        "--out",
        brk,
        *user,
    )
    log = open(tmp_path / "mosquitto.log", "w")
    broker = subprocess.Popen(
        [find_mosquitto(), "-c", str(brk / "mosquitto.conf")], stdout=log, stderr=subprocess.STDOUT
    )
    # updates on (a key update comes): the heap of the OTA tests (tests/ota/conftest.py OTA_HEAP)
    vb = VirtualBoard(str(tmp_path / "vboard"), heap="192K").start()
    try:
        assert wait_for_prompt(vb.port)
        cfg = tmp_path / "device.json"
        cfg.write_text(
            '{"device_id": "keyless-1", "broker": "localhost", "port": %d, "period_s": 1, "ota": true}' % port
        )
        out = run(
            "deploy",
            "--port",
            vb.port,
            "--config",
            cfg,
            "--mpy",
            "--ca",
            ca_dir,
            "--release-keys",
            rel_dir,
            "--no-reset",
        )
        assert "identity: issued keyless-1's certificate" in out
        assert "release keys: the board trusts key set 1 (%s)" % k1 in out
        said.append(console_until(vb.port, "main: connected"))
        board_keys = [pki.load_private_key(os.path.join(vb.fs, "tls", "key.der"))]
        # a rotation of the release key, published to the board over the broker as the operator
        out = run("release", "rotate", "--dir", rel_dir)
        k2 = out.split()[1]
        login = [
            "--tls-ca",
            creds / "ca.pem",
            "--cert",
            creds / "operator.pem",
            "--key",
            creds / "operator.key",
        ]
        out = run(
            "release",
            "publish",
            "--dir",
            rel_dir,
            "--broker",
            "127.0.0.1:%d" % port,
            "--device",
            "keyless-1",
            *login,
        )
        assert "key set 2 (%s) published to 1 devices" % ", ".join(sorted([k1, k2])) in out
        assert wait(lambda: board_keys_seq(vb) == 2, 60)  # the board took it
        run("release", "retire", "--dir", rel_dir)
        out = run("release", "list", "--dir", rel_dir)
        assert "%s  signs" % k2 in out and "%s  retired" % k1 in out
        out = run(
            "deploy",
            "--port",
            vb.port,
            "--config",
            cfg,
            "--mpy",
            "--ca",
            ca_dir,
            "--release-keys",
            rel_dir,
            "--no-reset",
        )
        assert "identity: kept keyless-1's certificate" in out
        assert "release keys: the board trusts key set 3 (%s)" % k2 in out
        run(
            "deploy",
            "--port",
            vb.port,
            "--config",
            cfg,
            "--mpy",
            "--ca",
            ca_dir,
            "--rotate",
            "--release-keys",
            rel_dir,
            "--no-reset",
        )
        said.append(console_until(vb.port, "main: connected"))
        board_keys.append(pki.load_private_key(os.path.join(vb.fs, "tls", "key.der")))
        assert pki.key_der(board_keys[0]) != pki.key_der(board_keys[1])
        # the collector logs in with its certificate, as the command line says
        col = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "fleetwire.tools.cli",
                "collect",
                "--broker",
                "127.0.0.1:%d" % port,
                "--landing",
                tmp_path / "landing",
                "--tls-ca",
                creds / "ca.pem",
                "--cert",
                creds / "collector.pem",
                "--key",
                creds / "collector.key",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        first = col.stdout.readline()
        col.send_signal(signal.SIGINT)
        rest, err = col.communicate(timeout=30)
        said.append(first + rest + err)
        assert "Ctrl-C stops" in first, first + rest + err
        run("ca", "revoke", "keyless-1", "--ca", ca_dir)
        run("ca", "list", "--ca", ca_dir)
    finally:
        vb.stop()
        broker.terminate()
        broker.wait(10)
        log.close()
    said.append((tmp_path / "mosquitto.log").read_text())
    assert "u'keyless-1'" in said[-1] and "u'collector'" in said[-1]  # each logged in as its certificate's CN
    keys = {
        "the CA's": pki.load_private_key(str(ca_dir / "ca.key")),
        "the collector's": pki.load_private_key(str(creds / "collector.key")),
        "the broker's": pki.load_private_key(str(brk / "server.key")),
        "the board's first": board_keys[0],
        "the board's second": board_keys[1],
        "the first release-signing": pki.load_private_key(str(rel_dir / (k1 + ".key"))),
        "the second release-signing": pki.load_private_key(str(rel_dir / (k2 + ".key"))),
    }
    text = "\n".join(said)
    for whose, key in keys.items():
        for form in key_forms(key):
            assert form not in text, "%s key appears in the output" % whose
    # the board's keys were never kept on the host: not in the CA, not beside the broker
    for d in (ca_dir, brk, creds):
        for name in os.listdir(d):
            with open(os.path.join(d, name), "rb") as f:
                data = f.read()
            for key in board_keys:
                assert pki.key_der(key) not in data and pki.key_pem(key) not in data, name


@pytest.fixture(scope="module")
def idle_board(tmp_path_factory):
    vb = VirtualBoard(str(tmp_path_factory.mktemp("idle-board")), heap="128K").start()
    assert wait_for_prompt(vb.port)
    yield vb
    vb.stop()


def files_on(board):
    return sorted(os.path.relpath(os.path.join(d, f), board.fs) for d, _, fs in os.walk(board.fs) for f in fs)


@pytest.mark.parametrize(
    "case,reason",
    [
        ("missing key", "no such file"),
        ("key is a directory", "is a directory"),
        ("key is not a key", "holds a certificate, not a private key"),
        ("certificate of another key", "does not match its key"),
        ("broker CA is a leaf", "is not a CA certificate"),
        ("no CA there", "no fleet CA in"),
        ("device takes the operator's name", "is the name of this CA's operator identity"),
        ("rotate without a CA", "--rotate needs the fleet CA"),
        ("updates without release keys", 'a board with "ota": true takes only releases signed by a key'),
        ("no release keys there", "no release-signing keys in"),
    ],
)
def test_bad_identity_input_is_refused_before_anything_reaches_the_board(
    idle_board, fleet_ca, tmp_path, case, reason
):
    before = files_on(idle_board)
    mine, theirs = fleet_ca.issue("bad-input-1"), fleet_ca.issue("bad-input-2")
    cert, key = pki.write_credentials(mine, str(tmp_path))
    other_cert, _ = pki.write_credentials(theirs, str(tmp_path))
    fleet_ca.role_of("operator") or fleet_ca.issue("operator", "operator")
    device = "operator" if case == "device takes the operator's name" else "bad-input-1"
    cfg = tmp_path / "device.json"
    ota = ', "ota": true' if "release keys" in case else ""
    cfg.write_text('{"device_id": "%s", "broker": "localhost", "port": 8883%s}' % (device, ota))
    opts = {
        "missing key": [
            "--cert",
            cert,
            "--key",
            str(tmp_path / "gone.key"),
            "--broker-ca",
            fleet_ca.cert_path,
        ],
        "key is a directory": ["--cert", cert, "--key", str(tmp_path), "--broker-ca", fleet_ca.cert_path],
        "key is not a key": ["--cert", cert, "--key", other_cert, "--broker-ca", fleet_ca.cert_path],
        "certificate of another key": ["--cert", other_cert, "--key", key, "--broker-ca", fleet_ca.cert_path],
        "broker CA is a leaf": ["--cert", cert, "--key", key, "--broker-ca", other_cert],
        "no CA there": ["--ca", str(tmp_path / "nothing")],
        "device takes the operator's name": ["--ca", fleet_ca.dir],
        "rotate without a CA": ["--rotate"],
        "updates without release keys": ["--ca", fleet_ca.dir],
        "no release keys there": ["--ca", fleet_ca.dir, "--release-keys", str(tmp_path / "nothing")],
    }[case]
    r = cli("deploy", "--port", idle_board.port, "--config", cfg, "--mpy", *opts)
    assert r.returncode == 2 and reason in r.stderr, r.stdout + r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and r.stdout == ""
    assert files_on(idle_board) == before  # nothing was written


def test_no_board_may_take_a_service_name_even_before_the_service_has_a_certificate(tmp_path):
    # the ACL gives `operator` its rights by name: a board called so would have them
    ca = pki.FleetCA.create(str(tmp_path / "ca"))
    with pytest.raises(pki.PKIError, match="operator identity"):
        ca.issue("operator", "device")
    # a broker configured for another operator name reserves that one too
    from fleetwire.host.identity import brokerconf

    brokerconf.write(str(tmp_path / "broker"), ca, ["localhost"], operators=["ops-desk"])
    with pytest.raises(pki.PKIError, match="operator identity"):
        ca.issue("ops-desk", "device")
    assert "user ops-desk" in (tmp_path / "broker" / "acl").read_text()


def test_the_issuer_needs_the_operators_login_and_a_bounded_validity(tmp_path):
    ca_dir = tmp_path / "ca"
    assert cli("ca", "init", "--ca", ca_dir).returncode == 0
    r = cli("ca", "serve", "--ca", ca_dir, "--broker", "127.0.0.1:1")
    assert r.returncode == 2 and "logs in as the operator: --tls-ca, --cert and --key" in r.stderr
    creds = tmp_path / "creds"
    assert (
        cli("ca", "issue", "operator", "--role", "operator", "--out", creds, "--ca", ca_dir).returncode == 0
    )
    login = ["--tls-ca", creds / "ca.pem", "--cert", creds / "operator.pem", "--key", creds / "operator.key"]
    r = cli("ca", "serve", "--ca", ca_dir, "--broker", "127.0.0.1:1", "--days", "731", *login)
    assert r.returncode == 2 and "--days: 1 to 730" in r.stderr
    r = cli("ca", "order", "no/such", "--ca", ca_dir, "--broker", "127.0.0.1:1", *login)
    assert r.returncode == 2 and "device id 'no/such'" in r.stderr
    r = cli("ca", "order", "sensor-17", "--ca", ca_dir, "--broker", "127.0.0.1:%d" % free_port(), *login)
    assert r.returncode == 2 and "cannot reach it" in r.stderr
    assert "PRIVATE KEY" not in r.stdout + r.stderr

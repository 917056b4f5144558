"""The board's side of mutual TLS, on MicroPython (the unix port, the board's .mpy tree)
against a mosquitto that enforces fleet identity (`fleetwire broker-config`'s lines): a
board with its certificate gets in; without one, with an expired one, one from another CA
or a revoked one it is refused, the exception's class says which, and the messages it
queued meanwhile wait in its store and arrive once it has a good certificate."""

import datetime
import os

import pytest

from fleetwire.host.identity import pki

PROGRAM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "identity_program.py")
HEAP = "128K"  # what the HIL boards get: TLS with mbedTLS on the 64-bit port needs more than 96K

pytestmark = pytest.mark.micropython


def run(mpy, *configs):
    return mpy.run([PROGRAM] + list(configs), heap=HEAP, timeout=60).stdout


def queued(observer, device_id):
    return sorted(m[1] for m in observer.messages if m[0] == "fleet/%s/telemetry" % device_id)


def test_a_board_with_its_certificate_connects_and_sends_what_it_queued(
    mpy, fleet_ca, board_files, make_observer, identity_mosquitto
):
    obs = make_observer(identity_mosquitto)
    obs.subscribe("fleet/tls-good/#", 1)
    cert, key = board_files.write("good", fleet_ca.issue("tls-good"))
    out = run(mpy, board_files.config("good", "tls-good", cert, key))
    assert "CONNECTED" in out and "SENT 3" in out, out
    obs.wait_until(lambda m: len(queued(obs, "tls-good")) == 3)
    assert queued(obs, "tls-good") == [b"queued-0", b"queued-1", b"queued-2"]


def _expired(ca, device_id, other_ca):
    start = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(days=10)
    return ca.issue(device_id, not_before=start, days=1)


def _other_ca(ca, device_id, other_ca):
    return other_ca.issue(device_id)


def _revoked(ca, device_id, other_ca):
    issued = ca.issue(device_id)
    ca.revoke(serial=pki.serial_hex(issued.cert))
    return issued


@pytest.mark.parametrize(
    "case,exception",
    [
        ("none", "NoCertificate"),
        ("expired", "CertificateExpired"),
        ("other-ca", "UnknownIssuer"),
        ("revoked", "CertificateRevoked"),
    ],
)
def test_a_refused_certificate_is_named_and_the_queued_messages_wait_for_a_good_one(
    mpy, fleet_ca, board_files, make_observer, identity_mosquitto, tmp_path, case, exception
):
    device_id = "tls-%s" % case
    obs = make_observer(identity_mosquitto)
    obs.subscribe("fleet/%s/#" % device_id, 1)
    bad = {}
    if case != "none":
        other = pki.FleetCA.create(str(tmp_path / "other-ca"), "fleetwire fleet CA")  # same name, other key
        make = {"expired": _expired, "other-ca": _other_ca, "revoked": _revoked}[case]
        cert, key = board_files.write("bad", make(fleet_ca, device_id, other))
        bad = {"cert": cert, "key": key}
        if case == "revoked":
            identity_mosquitto.reload()  # the broker reads the new CRL
    good_cert, good_key = board_files.write("good", fleet_ca.issue(device_id))
    out = run(
        mpy,
        board_files.config("bad", device_id, **bad),
        board_files.config("good", device_id, good_cert, good_key),
    )
    refused = [line for line in out.splitlines() if line.startswith("REFUSED")]
    assert refused and refused[0].split()[1] == exception, out
    assert "OSError" not in refused[0]
    # nothing got through with the bad certificate; all three queued messages came with the good one
    assert "SENT 3" in out, out
    obs.wait_until(lambda m: len(queued(obs, device_id)) == 3)
    assert queued(obs, device_id) == [b"queued-0", b"queued-1", b"queued-2"]


def test_the_refusal_says_what_to_do(mpy, fleet_ca, board_files):
    start = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(days=10)
    cert, key = board_files.write("old", fleet_ca.issue("tls-old", not_before=start, days=1))
    out = run(mpy, board_files.config("old", "tls-old", cert, key))
    line = [x for x in out.splitlines() if x.startswith("REFUSED")][0]
    expired_on = (start + datetime.timedelta(days=1)).strftime("%Y-%m-%d")
    assert "CN tls-old" in line and "expired on %s" % expired_on in line and "fleetwire deploy" in line, line


def test_a_broker_whose_certificate_names_another_host_is_not_trusted(mpy, mosquitto_tls, tmp_path):
    cfg = tmp_path / "c.json"
    cfg.write_text(
        '{"device_id": "tls-host", "broker": "localhost", "port": %d, "tls_ca": "%s", "store": "%s"}'
        % (mosquitto_tls.tls_mismatch_port, mosquitto_tls.ca_der, tmp_path / "store")
    )
    out = run(mpy, str(cfg))
    line = [x for x in out.splitlines() if x.startswith("REFUSED")][0]
    assert line.split()[1] == "BrokerNotTrusted" and "CN" in line and "tls_ca" in line, line


@pytest.mark.parametrize(
    "case,says",
    [
        ("missing key", "tls_key"),
        ("a certificate for a key", "tls_key"),
        ("no key named", "tls_cert and tls_key go together"),
        ("no CA", "no tls_ca"),
    ],
)
def test_an_identity_file_the_board_cannot_use_is_named(mpy, fleet_ca, board_files, case, says):
    cert, key = board_files.write("f", fleet_ca.issue("tls-files"))
    kw = {
        "missing key": dict(cert=cert, key=key + ".gone"),
        "a certificate for a key": dict(cert=cert, key=cert),
        "no key named": dict(cert=cert, key=""),
        "no CA": dict(cert=cert, key=key, tls_ca=""),
    }[case]
    out = run(mpy, board_files.config("f", "tls-files", **kw))
    line = [x for x in out.splitlines() if x.startswith("REFUSED")][0]
    assert line.split()[1] == "IdentityUnusable" and says in line, line


def test_every_refusal_has_its_text_and_every_text_a_refusal():
    # the texts are loaded only for a refusal (fleetwire.tls.reasons): a key without its text
    # would leave the board saying only the key
    import re
    from fleetwire.tls import reasons as tlsreasons
    from support import ROOT

    with open(os.path.join(ROOT, "device", "tls", "check.py"), encoding="utf-8") as f:
        used = set(re.findall(r'\bsay\(\w+, "(\w+)"', f.read()))
    texts = {k for k in dir(tlsreasons) if not k.startswith("_")}
    assert used and used | {"tls_refused"} == texts

"""A board's identity end to end, on a virtual board running the board's own main.py, deployed
with the fleet CA (`fleetwire deploy --ca`), against the mosquitto `fleetwire broker-config`
describes: the board publishes only as itself, reads only its own commands and updates, and
a revoked board is refused, says so, keeps its records and sends them once it has a new
certificate."""

import json
import subprocess
import sys
import time

from fleetwire.host.testing.hil import device_config, wait

ACL_APP = """
# tries what a board may not do, then says hello: everything it sends travels in order
import json
cfg = json.load(open("config.json"))
ME = cfg["device_id"]
OTHER = cfg["other"]

def _got(topic, msg):
    print("app: got", topic.decode(), msg.decode())

def setup(client):
    client.set_callback(_got)
    client.subscribe("fleet/%s/cmd/#" % ME, 1)
    client.subscribe("fleet/%s/cmd/#" % OTHER, 1)   # another board's commands
    client.subscribe("fleet/+/ota/#", 1)             # everyone's updates
    client.publish("fleet/%s/telemetry" % OTHER, "forged", qos=1)        # as another board
    client.publish("fleet/%s/cmd/reboot" % OTHER, "forged-cmd", qos=1)   # a command to another
    client.publish("fleet/%s/cmd/reboot" % ME, "self-cmd", qos=1)        # a command to itself
    client.publish("fleet/%s/ota/fw" % ME, "self-update", qos=1)         # an update to itself
    client.publish("fleet/%s/hello" % ME, "mine", qos=1)
    print("app: ready")
"""


def test_a_board_publishes_only_as_itself_and_reads_only_its_own_commands(
    hil_board, hil_broker, hil_observer, request
):
    cfg = device_config(request, hil_broker, period_s=1, other="acl-victim-7")
    me, other = cfg["device_id"], cfg["other"]
    hil_observer.subscribe("fleet/#", 1)  # the operator reads everything: it would see a forged message
    hil_board.put("app.py", ACL_APP)
    assert hil_board.deploy(cfg)["identity"] == "issued"
    console = hil_board.watch()
    console.wait_for("app: ready")
    hil_observer.wait_until(lambda m: ("fleet/%s/hello" % me, b"mine", 1, False) in m)
    hil_observer.wait_until(lambda m: any(t == "fleet/%s/telemetry" % me for t, *_ in m))  # its vitals
    # the forged messages went out before the hello, on the same connection: the broker dropped them
    from_board = [
        (t, p)
        for t, p, *_ in hil_observer.messages
        if p in (b"forged", b"forged-cmd", b"self-cmd", b"self-update")
    ]
    assert from_board == []
    # the operator commands both boards and updates both; the board gets only its own
    hil_observer.publish("fleet/%s/cmd/secret" % other, b"for-the-other", qos=1)
    hil_observer.publish("fleet/%s/ota/fw" % other, b"update-for-the-other", qos=1)
    hil_observer.publish("fleet/%s/cmd/done" % me, b"for-me", qos=1)
    hil_observer.publish("fleet/%s/ota/fw" % me, b"update-for-me", qos=1)
    # they were sent and routed: the operator, subscribed to fleet/#, got them back
    hil_observer.wait_until(lambda m: {b"for-the-other", b"update-for-the-other"} <= {x[1] for x in m})
    said = console.wait_for("app: got fleet/%s/ota/fw update-for-me" % me)
    assert "app: got fleet/%s/cmd/done for-me" % me in said
    assert "for-the-other" not in said and "update-for-the-other" not in said


def records(observer, device_id):
    return [json.loads(m[1]) for m in observer.messages if m[0] == "fleet/%s/telemetry" % device_id]


def test_a_revoked_board_is_refused_says_why_keeps_its_records_and_sends_them_after_a_new_certificate(
    hil_board, hil_broker, hil_observer, hil_ca, identity_mosquitto, request
):
    cfg = device_config(request, hil_broker, period_s=1)
    me = cfg["device_id"]
    hil_observer.subscribe("fleet/%s/telemetry" % me, 1)
    hil_board.deploy(cfg)
    console = hil_board.watch()
    console.wait_for("main: connected")
    assert wait(lambda: len(records(hil_observer, me)) >= 2)
    r = subprocess.run(
        [sys.executable, "-m", "fleetwire.tools.cli", "ca", "revoke", me, "--ca", hil_ca.dir],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0 and "revoked %s (device" % me in r.stdout, r.stdout + r.stderr
    identity_mosquitto.reload()  # the broker reads the new CRL; connected clients stay
    identity_mosquitto.restart()  # until their connection ends: the board's next one is refused
    refused = console.wait_for("main: reconnecting: CertificateRevoked")
    assert "CN %s" % me in refused and "--rotate" in refused
    console.stop()  # the deploy below needs the port
    hil_observer.wait_connected()
    n = len(records(hil_observer, me))
    time.sleep(3)  # about three records made while refused
    assert len(records(hil_observer, me)) == n, "records got through with a revoked certificate"
    res = hil_board.deploy(cfg, rotate=True)
    assert res["identity"] == "issued" and res["copied"] == ["tls/cert.der", "tls/key.der"]
    hil_board.console_until("main: connected")
    assert wait(lambda: len(records(hil_observer, me)) >= n + 4, 30)
    seqs = sorted({x["seq"] for x in records(hil_observer, me)})
    assert seqs == list(range(seqs[0], seqs[-1] + 1)), "records lost while refused: %s" % seqs


def test_a_certificate_issued_elsewhere_is_installed_as_given_and_kept(
    hil_board, hil_broker, hil_observer, hil_ca, request, tmp_path
):
    # the AWS IoT Core way: the service issues the certificate and key; deploy installs them with
    # the CA of the endpoint's certificate (here the fleet CA plays the service)
    from fleetwire.host.identity import pki

    cfg = device_config(request, hil_broker)
    cert, key = pki.write_credentials(hil_ca.issue(cfg["device_id"]), str(tmp_path))
    hil_observer.subscribe("fleet/%s/telemetry" % cfg["device_id"], 1)
    from fleetwire.host.rig.deploy import deploy

    res = deploy(
        hil_board.port, cfg, mpy=True, log=lambda m: None, cert=cert, key=key, broker_ca=hil_ca.cert_path
    )
    assert res["identity"] == "installed" and {"tls/cert.der", "tls/key.der", "tls/ca.der"} <= set(
        res["copied"]
    )
    hil_board.console_until("main: connected")
    assert wait(lambda: records(hil_observer, cfg["device_id"]))
    again = deploy(
        hil_board.port, cfg, mpy=True, log=lambda m: None, cert=cert, key=key, broker_ca=hil_ca.cert_path
    )
    assert again["identity"] == "kept" and again["copied"] == []

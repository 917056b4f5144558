"""A program pays for what it uses: the client's feature modules are loaded by the option or
call that needs them, never before and never by a packet's arrival. On MicroPython (the
board tree as .mpy, 80 KB heap) against mosquitto: each scenario prints the fleetwire
modules each step loaded (tests/device/loading_program.py)."""

import os
import subprocess

import pytest

from support import device_command

PROGRAM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "loading_program.py")
FEATURES = {
    "qos2",
    "store",
    "reconnect",
    "renew",
    "tls",
    "tls.wrap",
    "tls.aio",
    "tls.watch",  # certificates renewed over the air: the runner with cert_renew_days
    "tls.renew",
    "dropold",
    "ring",
    "ring.store",
    "ring.mount",
    "mount",
    "filestore",
    "ramstore",
    "aio",
    "aioretry",
    "vitals",
    "board",
    "runner",
    "errkinds",  # the exception classes a caller tells apart: loaded with the first error
    "errors",  # their documented home, loaded when a program names it (fleetwire.errors)
    "cmd",  # commands (fleetwire.cmd), loaded by the program that enables them
    "desired",  # desired state (fleetwire.desired)
    "feed",  # bytes in for the tests' and sweeps' drivers, never a client's
    "crash",  # crash capture: the runner's, or a program's own crashrun.install()
    "crashrun",  # install() and run() for a program of its own
    "crashsend",  # a boot's crash records to flash and to the broker: the runner's
    "crashfile",  # crash records in a file where a port has no RTC memory (the unix port)
    "crashprint",  # print() feeding the crash record's log: "crash_print": true
    "v5",  # the MQTT 5 client (fleetwire.v5.MQTTClient)
    "v5x",  # its CONNECT/CONNACK and error wording, loaded for the call
    "aio5",  # the MQTT 5 asyncio client (fleetwire.aio5.AsyncClient)
    "errkinds5",  # MQTT 5's error classes, with the first one raised
}
# what the plain program loads, all of it at import
PLAIN = {"client", "session", "codec", "codec.wire", "codec.errors", "codec.text", "codec.topics"}
# the MQTT 5 codec: a 3.1.1 program loads none of it, whatever options it uses
MQTT5 = {
    "codec.wire5",
    "codec.pack5",
    "codec.packets5",
    "codec.stream5",
    "codec.reasons5",
    "codec.codes5",
}


def test_the_mqtt5_set_names_every_mqtt5_module_of_the_codec():
    shared = os.path.join(
        os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "shared"
    )
    assert {"codec." + f[:-3] for f in os.listdir(shared) if f.endswith("5.py")} == MQTT5


def steps(board_lib, broker, scenario, *extra, port=None):
    cmd, env = device_command("micropython", board_lib, PROGRAM)
    r = subprocess.run(
        cmd + [broker.host, str(port or broker.port), scenario] + list(extra),
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    out = {}
    for line in r.stdout.splitlines():
        w = line.split()
        if w[0] == "STEP":
            out[w[1]] = set(w[2:])
    return out


@pytest.mark.micropython
def test_a_plain_program_loads_no_feature_module(board_lib, mosquitto):
    # connect, subscribe at QoS 1, publish at QoS 0 and 1, receive: umqtt.simple's program
    s = steps(board_lib, mosquitto, "plain")
    assert s["import"] <= PLAIN, s["import"]
    loaded = set().union(*s.values())
    assert not loaded & FEATURES, s
    assert not loaded & MQTT5, s  # MQTT 5 costs a 3.1.1 program nothing
    assert all(not v for k, v in s.items() if k != "import"), s  # nothing loads after the import


@pytest.mark.micropython
@pytest.mark.parametrize(
    "scenario, step, modules",
    [
        ("qos2", "publish2", {"qos2"}),  # the first publish at QoS 2
        ("sub2", "subscribe", {"qos2"}),  # a subscription at QoS 2
        ("persistent", "connect", {"qos2"}),  # a kept session may hold QoS 2 flows
        # store= (a RamStore is a ring)
        ("store", "construct", {"store", "ramstore", "ring", "ring.store", "renew"}),
        ("reconnect", "construct", {"reconnect", "renew"}),  # reconnect=True
        ("reconnect2", "connect2", {"renew"}),  # a connect() after the first
        ("drop", "construct", {"dropold"}),  # drop_oldest=True
        ("unsubscribe", "unsubscribe", set()),  # in the core
        ("will", "connect", set()),  # in the core (CONNECT carries it)
        # crashrun.install(): the capture, and what sends the last boot's records until its
        # Sender is closed; the unix port keeps records in a file (a board: RTC memory)
        ("crash", "construct", {"crash", "crashrun", "crashsend", "crashfile"}),
        ("commands", "enable", {"cmd"}),  # commands: enable() loads it, nothing else does
        ("desired", "enable", {"desired"}),  # desired state: likewise
    ],
)
def test_each_option_or_call_loads_its_own_module(board_lib, mosquitto, scenario, step, modules):
    s = steps(board_lib, mosquitto, scenario)
    got = {m for v in s.values() for m in v} - PLAIN
    assert not got & MQTT5, s
    assert s[step] - PLAIN == modules, s
    assert got == modules, s  # and nothing else, at no other step


@pytest.mark.micropython
def test_an_mqtt_5_program_loads_its_client_at_construct_and_its_connect_packer_for_the_connect(
    board_lib, mosquitto
):
    s = steps(board_lib, mosquitto, "v5")
    assert s["construct"] - PLAIN == {"v5", "codec.wire5"}, s
    assert s["connect"] - PLAIN == set(), s  # CONNECT's packer (pack5) is loaded and let go
    for step in ("subscribe", "publish", "receive", "disconnect"):
        assert s[step] == set(), s


@pytest.mark.micropython
def test_tls_loads_its_module_at_connect(board_lib, mosquitto_tls):
    s = steps(board_lib, mosquitto_tls, "tls", mosquitto_tls.ca_der, port=mosquitto_tls.tls_port)
    assert s["construct"] - PLAIN == set(), s
    assert s["connect"] - PLAIN == {"tls", "tls.wrap"}, s  # the folder and its module
    assert not set().union(*s.values()) & MQTT5, s

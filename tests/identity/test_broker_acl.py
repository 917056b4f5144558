"""The services' side of the identity broker (`fleetwire broker-config`'s lines, real
mosquitto, paho clients with certificates from the fleet CA): the collector reads the fleet's
telemetry and nothing else, the operator alone sends commands and updates, and a client
without a certificate gets nowhere. Each refusal is proven by a subscriber that would have
seen the message."""

import time
import pytest


@pytest.fixture
def operator(identity_mosquitto, make_observer):
    o = make_observer(identity_mosquitto)
    o.subscribe("fleet/#", 1)
    return o


def live(messages):
    """The payloads of messages sent now: the session's broker also hands the operator, on
    fleet/#, what other tests left retained (key updates, reported states)."""
    return [x[1] for x in messages if not x[3]]


def test_the_collector_reads_telemetry_and_cannot_command_or_pose_as_a_board(
    identity_mosquitto, make_observer, operator
):
    board = make_observer(identity_mosquitto, identity=("acl-board-1", "device"))
    collector = make_observer(identity_mosquitto, identity=("collector", "collector"))
    collector.subscribe("fleet/+/telemetry", 1)
    collector.subscribe("fleet/+/cmd/#", 1)  # granted, but nothing may be delivered
    collector.publish("fleet/acl-board-1/cmd/reboot", b"from-the-collector", qos=1)
    collector.publish("fleet/acl-board-1/telemetry", b"posing-as-the-board", qos=1)
    operator.publish("fleet/acl-board-1/cmd/ping", b"from-the-operator", qos=1)
    board.publish("fleet/acl-board-1/telemetry", b"record", qos=1)
    collector.wait_until(lambda m: ("fleet/acl-board-1/telemetry", b"record", 1, False) in m)
    # the operator (reads fleet/#) saw its own command and the record, in order, and nothing else
    got = operator.wait_until(lambda m: any(x[1] == b"record" for x in m))
    assert live(got) == [b"from-the-operator", b"record"]
    assert [x[1] for x in collector.messages] == [b"record"]


def test_only_the_operator_sends_commands_and_updates(identity_mosquitto, make_observer, operator):
    board = make_observer(identity_mosquitto, identity=("acl-board-2", "device"))
    board.subscribe("fleet/acl-board-2/cmd/#", 1)
    board.subscribe("fleet/acl-board-2/ota/#", 1)
    other = make_observer(identity_mosquitto, identity=("acl-board-3", "device"))
    other.publish("fleet/acl-board-2/cmd/reboot", b"from-another-board", qos=1)
    other.publish("fleet/acl-board-2/ota/fw", b"update-from-another-board", qos=1)
    operator.publish("fleet/acl-board-2/cmd/reboot", b"from-the-operator", qos=1)
    operator.publish("fleet/acl-board-2/ota/fw", b"update-from-the-operator", qos=1)
    got = board.wait_until(lambda m: len(m) >= 2)
    assert [x[1] for x in got] == [b"from-the-operator", b"update-from-the-operator"]
    assert live(operator.messages) == [b"from-the-operator", b"update-from-the-operator"]


def test_a_client_without_a_certificate_is_refused(identity_mosquitto):
    from fleetwire.host.testing.observer import Observer

    with pytest.raises(AssertionError) as e:
        Observer(
            identity_mosquitto.host, identity_mosquitto.port, tls_ca=identity_mosquitto.ca_pem, timeout=1
        )
    assert "CONNACK" in str(e.value) or "could not reach" in str(e.value)
    identity_mosquitto.wait_for_log("peer did not return a certificate")


def test_a_board_sends_its_crash_records_the_collector_reads_them_and_no_one_else_writes_them(
    identity_mosquitto, make_observer
):
    board = make_observer(identity_mosquitto, identity=("acl-board-2", "device"))
    other = make_observer(identity_mosquitto, identity=("acl-board-3", "device"))
    collector = make_observer(identity_mosquitto, identity=("collector", "collector"))
    collector.subscribe("fleet/+/crash", 1)
    other.publish("fleet/acl-board-2/crash", b"posing-as-board-2", qos=1)
    board.publish("fleet/acl-board-2/crash", b"crash-record", qos=1)
    collector.wait_until(lambda m: any(x[1] == b"crash-record" for x in m))
    time.sleep(0.2)
    assert [x[1] for x in collector.messages] == [b"crash-record"]


def test_a_board_reads_only_its_own_commands_and_desired_state_and_answers_only_as_itself(
    identity_mosquitto, make_observer, operator
):
    board = make_observer(identity_mosquitto, identity=("acl-board-4", "device"))
    board.subscribe("fleet/+/cmd/#", 1)  # granted, but only its own may be delivered
    collector = make_observer(identity_mosquitto, identity=("collector", "collector"))
    collector.subscribe("fleet/+/answer", 1)
    collector.subscribe("fleet/+/reported", 1)
    operator.publish("fleet/acl-board-5/cmd/run", b"for-another-board", qos=1)
    operator.publish("fleet/acl-board-5/cmd/desired", b"desired-of-another", qos=1)
    board.publish("fleet/acl-board-4/cmd/desired", b"its-own-desired-state", qos=1)  # not its to set
    board.publish("fleet/acl-board-5/answer", b"answer-posing-as-another", qos=1)
    board.publish("fleet/acl-board-5/reported", b"state-posing-as-another", qos=1)
    operator.publish("fleet/acl-board-4/cmd/run", b"command", qos=1)
    operator.publish("fleet/acl-board-4/cmd/desired", b"desired", qos=1)
    board.publish("fleet/acl-board-4/answer", b"answer", qos=1)
    board.publish("fleet/acl-board-4/reported", b"reported", qos=1)
    got = board.wait_until(lambda m: len(m) >= 2)
    assert [x[1] for x in got] == [b"command", b"desired"]
    got = collector.wait_until(lambda m: len(m) >= 2)
    assert [(x[0], x[1]) for x in got] == [
        ("fleet/acl-board-4/answer", b"answer"),
        ("fleet/acl-board-4/reported", b"reported"),
    ]
    assert b"its-own-desired-state" not in [x[1] for x in operator.messages]

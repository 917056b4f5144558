"""The broker matrix harness (fleetwire.host.brokers): each broker starts on 127.0.0.1
and a free port, takes a login, refuses the matrix's denied prefix, stops with every
process it started, and the documented table and quirk notes are the ones its classes
describe, each quirk asserted by a scenario test."""

import ast
import os
import time

import pytest

from fleetwire.host import brokers
from fleetwire.host.brokers import FEATURES, NAMES, classes
from fleetwire.host.brokers.mosquitto import accepts

from support import ROOT


def listening(pid_group):
    """Local TCP ports the processes of a process group listen on (from /proc)."""
    inodes = set()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            if os.getpgid(int(pid)) != pid_group:
                continue
            for fd in os.listdir("/proc/%s/fd" % pid):
                link = os.readlink("/proc/%s/fd/%s" % (pid, fd))
                if link.startswith("socket:["):
                    inodes.add(link[8:-1])
        except OSError:
            continue
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                cols = line.split()
                if cols[3] == "0A" and cols[9] in inodes:  # LISTEN
                    addr, port = cols[1].rsplit(":", 1)
                    found.append((addr, int(port, 16)))
    return found


def test_every_broker_listens_on_loopback_only_and_takes_the_login(broker, make_observer):
    # RabbitMQ also runs epmd and an Erlang distribution port: loopback too
    for addr, port in listening(os.getpgid(broker.proc.pid)):
        assert addr in ("0100007F", "00000000000000000000000001000000"), (broker.name, addr, port)
    obs = make_observer(broker, username=broker.USER, password=broker.PASSWORD)
    assert obs.subscribe("rig/matrix/#", 1) == 1
    with pytest.raises(AssertionError, match="refused the subscription|no SUBACK"):
        obs.subscribe(broker.DENIED_PREFIX + "x", 1, timeout=3)


@pytest.fixture
def matrix_broker(request):
    """A broker of the matrix of this test's own (request.param: its name), started; closed after."""
    b = brokers.make(request.param).start()
    yield b
    b.close()


# (RabbitMQ left out: 8-15 s a start)
@pytest.mark.parametrize("matrix_broker", ["mosquitto", "aedes", "amqtt"], indirect=True)
def test_a_broker_restarts_on_its_port_and_stop_ends_all_its_processes(matrix_broker):
    b = matrix_broker
    port, group = b.port, os.getpgid(b.proc.pid)
    b.stop()
    assert closes(port)
    b.start()
    assert b.port == port and accepts(b.host, port)
    group2 = os.getpgid(b.proc.pid)
    b.close()
    assert closes(port)
    for g in (group, group2):
        with pytest.raises(ProcessLookupError):
            os.killpg(g, 0)


def closes(port, within=2):
    # the kernel may keep a dead process's listening socket a moment (seen with node)
    deadline = time.monotonic() + within
    while accepts("127.0.0.1", port):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_the_matrix_is_chosen_by_name():
    assert brokers.matrix({}) == NAMES
    assert brokers.matrix({"FLEETWIRE_BROKERS": "aedes, mosquitto"}) == ("aedes", "mosquitto")
    with pytest.raises(ValueError, match="FLEETWIRE_BROKERS names nats"):
        brokers.matrix({"FLEETWIRE_BROKERS": "nats"})
    with pytest.raises(ValueError, match="no broker 'nats'"):
        brokers.make("nats")


def test_the_documented_table_and_notes_are_the_brokers_own():
    page = open(os.path.join(ROOT, "docs", "reference", "brokers.md"), encoding="utf-8").read()
    block = page.split("<!-- broker-matrix:begin -->\n", 1)[1].split("<!-- broker-matrix:end -->", 1)[0]
    assert block == brokers.table(brokers.versions()) + "\n" + brokers.quirk_notes()


def test_every_quirk_is_asserted_by_a_scenario_test():
    # the scenario tests handle each quirk by its tag: a quirk with a tag no test names
    # would be a documented claim nothing checks
    strings = set()
    for path in ("tests/device/test_brokers.py", "tests/device/test_umqtt_compat.py", "host/brokers/base.py"):
        with open(os.path.join(ROOT, path), encoding="utf-8") as f:
            strings |= {n.value for n in ast.walk(ast.parse(f.read())) if isinstance(n, ast.Constant)}
    for name, cls in classes().items():
        for key, q in cls.quirks.items():
            assert key in FEATURES, (name, key)
            assert q.tag in strings, (name, key, q.tag)

"""Programs written against umqtt.simple's documented API run on fleetwire with only
the import changed, on MicroPython (80 KB heap) and CPython, against every broker of
the matrix (they log in, as the matrix asks)."""

import os
import subprocess
import threading
import time

import pytest

from support import device_command

PROGRAMS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "umqtt_programs")


def ported(name, tmp_path):
    src = open(os.path.join(PROGRAMS, name)).read()
    assert "from umqtt.simple import MQTTClient" in src
    out = tmp_path / name
    out.write_text(src.replace("from umqtt.simple import MQTTClient", "from fleetwire import MQTTClient"))
    return str(out)


@pytest.fixture
def observer(broker, make_observer):
    return make_observer(broker, username=broker.USER, password=broker.PASSWORD)


def where(broker, topic):
    """The programs' arguments: server, port, topic, user, password."""
    return broker.host, broker.port, topic, broker.USER, broker.PASSWORD


def start(interp, board_lib, path, *args):
    cmd, env = device_command(interp, board_lib, path)
    return subprocess.Popen(
        cmd + [str(a) for a in args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )


def finish(p, timeout=20):
    out, err = p.communicate(timeout=timeout)
    assert p.returncode == 0, "exit %d\n%s\n%s" % (p.returncode, out, err)
    return out.splitlines()


def wait_line(p, want, timeout=20):
    result = []
    t = threading.Thread(target=lambda: result.append(p.stdout.readline()), daemon=True)
    t.start()
    t.join(timeout)
    assert result and result[0].strip() == want, "expected %r, got %r" % (want, result)


def test_publish_program(interp, board_lib, broker, observer, tmp_path):
    topic = "compat/pub/" + interp
    observer.subscribe(topic, 1)
    p = start(interp, board_lib, ported("publish.py", tmp_path), *where(broker, topic))
    assert finish(p) == ["published"]
    sent = [
        (b"hello from umqtt code", broker.delivers_at(0, 1)),
        (b"retained", broker.delivers_at(0, 1)),
        (b"at least once", 1),
    ]
    if broker.quirk("qos_out") == "lost_on_disconnect":
        # amqtt may lose what a client publishes right before DISCONNECT, even acknowledged
        time.sleep(1)
        assert {(m[1], m[2]) for m in observer.messages} <= set(sent)
    else:
        assert [(m[1], m[2]) for m in observer.wait_for(3)] == sent
    observer.publish(topic, b"", qos=1, retain=True)  # leave no retained message behind


def test_check_msg_program(interp, board_lib, broker, observer, tmp_path):
    p = start(interp, board_lib, ported("check_msg.py", tmp_path), *where(broker, "compat/poll"))
    wait_line(p, "subscribed")
    observer.publish("compat/poll", b"ping", qos=0)
    assert finish(p) == ["compat/poll ping"]


def test_wait_msg_program(interp, board_lib, broker, observer, tmp_path):
    p = start(interp, board_lib, ported("wait_msg.py", tmp_path), *where(broker, "compat/wait"))
    wait_line(p, "subscribed")
    observer.publish("compat/wait", b"ding", qos=1)
    assert finish(p) == ["compat/wait ding"]


def test_last_will_program(interp, board_lib, broker, observer, tmp_path):
    observer.subscribe("compat/lwt", 1)
    p = start(interp, board_lib, ported("last_will.py", tmp_path), *where(broker, "compat/lwt"))
    assert finish(p) == ["pinged"]
    assert [(m[1], m[2]) for m in observer.wait_for(1)] == [(b"offline", 1)]

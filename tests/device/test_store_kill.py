"""Kill test: a device publishing QoS 1 and 2 while offline is killed
with SIGKILL at random moments and started again on the same flash image; when
it connects a subscriber receives every message a publish() accepted,
QoS 2 exactly once. On MicroPython (80K heap) and CPython, each front (MQTTClient and
AsyncClient); the ring store on an emulated partition, and the file store in a directory."""

import os
import random
import signal
import subprocess

import pytest

from fleetwire.host.brokers.mosquitto import Mosquitto
from fleetwire.host.portable import PATH as PORTABLE
from support import device_command

PROGRAM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "store_program.py")


def start(interp, board_lib, front, flash, *args):
    # a ring store's partition (8 KB) is in the unix port's heap; on a board it is flash
    cmd, env = device_command(interp, board_lib, PROGRAM, 8 if flash.endswith(".partition") else 0)
    if interp == "micropython":
        env["MICROPYPATH"] += os.pathsep + PORTABLE
    return subprocess.Popen(
        cmd + [flash] + [str(a) for a in args] + [front],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


@pytest.mark.parametrize("store", ["ring", "file"])
@pytest.mark.parametrize("interp", ["micropython", "cpython"])
def test_messages_accepted_before_a_kill_reach_the_subscriber(
    interp, front, store, board_lib, tmp_path, make_observer
):
    if interp == "cpython":
        board_lib = None
    # Running from the start, so no other process can take its port; the device
    # publishes without connecting until the drain.
    broker = Mosquitto().start()
    flash = str(tmp_path / ("mqtt.partition" if store == "ring" else "store"))
    rng = random.Random(7)
    accepted = []
    try:
        for kill in range(6):
            # A kill may land after publish() returned and before the program's
            # output got out: each run numbers from its own thousand, so no
            # payload is ever used twice.
            want = rng.randrange(3, 15)  # kill after this many more acceptances,
            n = 0  # while the next few are being made
            p = start(interp, board_lib, front, flash, broker.port, "publish", 1000 * kill, want + 4)
            while n < want:
                line = p.stdout.readline()
                if not line:
                    raise AssertionError("device ended: " + p.stderr.read())
                assert line.startswith("ACCEPTED"), line
                accepted.append(int(line.split()[1]))
                n += 1
            p.send_signal(signal.SIGKILL)
            out, _ = p.communicate()
            # publish() calls that returned between the last read and the kill count too
            accepted += [int(x.split()[1]) for x in out.splitlines() if x.startswith("ACCEPTED")]
        obs = make_observer(broker)
        obs.subscribe("kill/test", qos=2)
        p = start(interp, board_lib, front, flash, broker.port, "drain")
        out, err = p.communicate(timeout=120)
        assert "DRAINED" in out, err
        obs.wait_until(lambda m: {int(x[1]) for x in m} >= set(accepted), timeout=20)
        got = [int(x[1]) for x in obs.messages]
        qos2 = [i for i in got if i % 2]
        assert len(qos2) == len(set(qos2)), "a QoS 2 message arrived twice: %r" % got
        # MQTT keeps order per QoS level (a QoS 2 message is released a round trip later)
        qos1 = [i for i in got if i % 2 == 0]
        assert qos1 == sorted(qos1) and qos2 == sorted(qos2), "out of order"
        assert len(accepted) > 20
    finally:
        broker.close()

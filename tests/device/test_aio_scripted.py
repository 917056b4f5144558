"""The asyncio front (fleetwire.aio.AsyncClient) against a scripted broker, on MicroPython
(the suite's device heap) and CPython: exact bytes in, exact bytes out."""

import contextlib
import os
import subprocess

from fleetwire.codec.packets import Connack, Connect, Disconnect, Puback, Publish, Suback

from support import device_command

PROGRAM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "aio_burst_program.py")


@contextlib.contextmanager
def subscribed(interp, board_lib, b, *args):
    """The program connected and subscribed to "a" through the scripted broker b; after the
    block, its DISCONNECT expected and its output in the dict yielded ("out")."""
    cmd, env = device_command(interp, board_lib, PROGRAM)
    proc = subprocess.Popen(
        cmd + ["127.0.0.1", str(b.port)] + list(args),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    res = {}
    try:
        b.accept(timeout=10)
        b.expect(Connect("burst", True, 0))
        b.send(Connack(False, 0))
        b.send(Suback(b.receive().packet_id, [1]))
        assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
        yield res
        b.expect(Disconnect())
        out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    res["out"] = out


def test_a_burst_of_33_qos1_publishes_in_one_read_is_taken_and_acknowledged(
    interp, board_lib, scripted_broker
):
    # More PUBLISHes than the acks the client can queue: the reader stops taking packets
    # until the acks are written, then goes on with the ones already read (backpressure)
    b = scripted_broker
    with subscribed(interp, board_lib, b, "33") as res:
        b.send(b"".join(Publish("a", b"", 1, packet_id=i + 1).encode() for i in range(33)))
        b.expect([Puback(i + 1) for i in range(33)])
    assert res["out"].split() == ["33"]


def test_messages_longer_than_max_packet_come_in_pieces_and_are_acknowledged_after_the_last(
    interp, board_lib, scripted_broker
):
    b = scripted_broker
    with subscribed(interp, board_lib, b, "3", "100") as res:
        data = Publish("a", b"x" * 1000, 1, packet_id=1).encode()
        b.send(data[:600])
        b.expect_nothing(0.3)  # no PUBACK before the last byte
        b.send(
            data[600:] + Publish("a", b"y" * 5000, 0).encode() + Publish("a", b"z", 1, packet_id=2).encode()
        )
        b.expect([Puback(1), Puback(2)])
    got = res["out"].split()
    assert got[0] == "3" and [g.split("/")[0] for g in got[1:]] == ["1000", "5000", "1"], res["out"]
    assert all(int(g.split("/")[1]) >= 10 for g in got[1:3]), res["out"]  # pieces of at most max_packet

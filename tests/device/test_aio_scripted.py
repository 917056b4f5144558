"""The asyncio front (fleetwire.aio.AsyncClient) against a scripted broker, on MicroPython
(the suite's device heap) and CPython: exact bytes in, exact bytes out."""

import os
import subprocess

from fleetwire.codec.packets import Connack, Connect, Disconnect, Puback, Publish, Suback

from support import device_command

PROGRAM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "aio_burst_program.py")


def test_a_burst_of_33_qos1_publishes_in_one_read_is_taken_and_acknowledged(
    interp, board_lib, scripted_broker
):
    # More PUBLISHes than the acks the client can queue: the reader stops taking packets
    # until the acks are written, then goes on with the ones already read (backpressure)
    b = scripted_broker
    cmd, env = device_command(interp, board_lib, PROGRAM)
    proc = subprocess.Popen(
        cmd + ["127.0.0.1", str(b.port), "33"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        b.accept(timeout=10)
        b.expect(Connect("burst", True, 0))
        b.send(Connack(False, 0))
        b.send(Suback(b.receive().packet_id, [1]))
        assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
        b.send(b"".join(Publish("a", b"", 1, packet_id=i + 1).encode() for i in range(33)))
        b.expect([Puback(i + 1) for i in range(33)])
        b.expect(Disconnect())
        out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert out.split() == ["33"]

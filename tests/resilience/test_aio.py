"""The asyncio front (fleetwire.aio.AsyncClient) on MicroPython (80 KB heap) and
CPython: it publishes and receives while the proxy keeps cutting the link, and
reconnects by itself: QoS 2 exactly once and in order both ways, QoS 1 at least once."""

import collections
import json
import os
import subprocess
import time

import pytest

from support import device_command

PROGRAM = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "device", "aio_program.py"
)


@pytest.mark.parametrize("qos", [1, 2])
def test_async_client_reconnects_and_keeps_its_promises_under_repeated_cuts(
    interp, board_lib, make_proxy, make_observer, qos
):
    p = make_proxy()
    topic = "aio/%s/%d" % (interp, qos)
    o = make_observer()
    o.subscribe(topic + "/out", 2)
    n_out, n_in = 60, 20
    cmd, env = device_command(interp, board_lib, PROGRAM)
    proc = subprocess.Popen(
        cmd
        + ["127.0.0.1", str(p.port), "aio-%s-%d" % (interp[:2], qos), topic, str(qos), str(n_out), str(n_in)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )

    ack = "PUBREC" if qos == 2 else "PUBACK"
    # Every connection is cut: after the 3rd PUBLISH up, the 2nd acknowledgement
    # down, or the next PUBLISH down, in turn.
    p.cut_each_connection(
        dict(direction="up", after="PUBLISH", nth=3),
        dict(direction="down", after=ack, nth=2),
        dict(direction="down", after="PUBLISH", nth=1),
    )
    try:
        assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
        for i in range(n_in):  # paced, so the inbound flows meet the cuts too
            o.publish(topic + "/in", b"i%04d" % i, qos=qos)
            time.sleep(0.02)
        out, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, out[-2000:] + err[-2000:]
    r = json.loads(out.strip().splitlines()[-1])
    assert r["pending"] == 0
    assert p.cuts >= 5, "the link was cut only %d times" % p.cuts
    assert r["events"]["connected"] >= 3 and r["events"]["retry"] >= 2, r[
        "events"
    ]  # it came back, twice at least
    sent_out = ["m%04d" % i for i in range(n_out)]
    sent_in = ["i%04d" % i for i in range(n_in)]
    msgs = o.wait_until(lambda m: {x[1].decode() for x in m} >= set(sent_out), 20)
    for got, sent, where in (
        (r["got"], sent_in, "at the device"),
        ([m[1].decode() for m in msgs], sent_out, "at the subscriber"),
    ):
        counts = collections.Counter(got)
        assert set(counts) == set(sent), "lost %s: %s" % (where, sorted(set(sent) - set(counts)))
        firsts = list(dict.fromkeys(got))
        assert firsts == sent, "out of order %s" % where
        if qos == 2:
            assert max(counts.values()) == 1, "duplicates %s: %s" % (
                where,
                {m: n for m, n in counts.items() if n > 1},
            )

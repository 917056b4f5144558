"""A crash record's upload (fleetwire.crashsend.Sender, as the runner drives it) through a
connection cut at the bytes of its exchange, each direction, and after each packet: every
record arrives, its file is removed only once the broker acknowledged it, and after the
collector's deduplication by (device_id, boot_id, crash_id) each lands exactly once. On
MicroPython (80 KB heap), the blocking front, behind the fault-injecting proxy."""

import collections
import os
import time

import pytest

from fleetwire.host.fleet.crashrec import parse

TIMEOUT = 20


@pytest.mark.parametrize("interp", ["micropython"])
def test_each_crash_record_lands_once_through_cuts_all_along_its_upload(
    device, make_proxy, make_observer, tmp_path, cut_report
):
    p = make_proxy()
    d = device("crash-up")
    d.call(
        "init",
        id=d.client_id,
        host="127.0.0.1",
        port=p.port,
        reconnect=True,
        backoff_min=0.01,
        backoff_max=0.05,
        io_timeout=5,
    )
    d.call("connect", clean=False)
    topic = "fleet/%s/crash" % d.client_id
    o = make_observer()
    o.subscribe(topic, 1)
    where = str(tmp_path / "crash")
    boots = []

    def exchange():
        boots.append(len(boots) + 1)
        d.call("crash_rec", d=where, boot=boots[-1])
        r = d.call("crash_send", d=where, id=d.client_id, ms=TIMEOUT * 1000, timeout=TIMEOUT + 5)
        assert r["left"] == 0 and os.listdir(where) == [], r  # removed once acknowledged
        assert p.wait_quiet(0.02)

    p.wait_quiet(0.05)
    up, down = p.bytes("up"), p.bytes("down")
    conn = p.accepted
    exchange()  # a clean one measures the bytes and packets to cut at
    n = p.bytes("up") - up
    assert n > 200  # the PUBLISH: header, topic, a record of a couple of hundred bytes
    # every byte of the packet's head and tail, and every 16th of the record between them (a cut
    # anywhere in it is the same half-written packet: the whole of it costs 30 s, not 4)
    ups = sorted(set(range(48)) | set(range(48, n - 8, 16)) | set(range(n - 8, n)))
    points = [("up", {"at": k}) for k in ups]
    points += [("down", {"at": k}) for k in range(p.bytes("down") - down)]
    points += [(direction, {"after": name}) for direction, name in p.packets(conn)[-2:]]
    for direction, at in points:
        p.cut(direction, **at)
        exchange()
    assert p.cuts >= len(points) - 2
    o.wait_until(lambda msgs: len([m for m in msgs if m[0] == topic]) >= len(boots), TIMEOUT)
    time.sleep(0.3)  # a late duplicate would arrive by now
    recs = [parse(m[1], "x") for m in o.messages if m[0] == topic]  # as the collector decodes them
    keys = collections.Counter((r["device_id"], r["boot_id"], r["crash_id"]) for r in recs)
    assert sorted(k[1] for k in keys) == boots  # none lost, one key each
    assert all(r["type"] == "ZeroDivisionError" for r in recs)
    cut_report(len(points), len(boots))

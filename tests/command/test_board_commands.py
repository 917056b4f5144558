"""Commands and desired state on a board: the real client with fleetwire.cmd and
fleetwire.desired on the MicroPython unix port (80 KB heap, .mpy board tree) against a real
mosquitto, the operator's side through fleetwire.host.command (board_program.py)."""

import collections
import os
import re
import subprocess
import threading
import time

import pytest

from support import device_command
from fleetwire.host.command.operator import Operator

PROGRAM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "board_program.py")
BOOT_S = 60  # a generous deadline for a board to come up on a loaded machine


class Board:
    """The board program in its own directory (its flash), started and stopped at will."""

    def __init__(self, board_lib, broker, name, flash, login=(), extra_heap_kb=0):
        self.cmd, self.env = device_command("micropython", board_lib, PROGRAM, extra_heap_kb)
        self.args = [broker.host, str(broker.port), name, "120"] + list(login)
        self.flash = flash
        self.name = name
        self.p = None

    def start(self):
        self.p = subprocess.Popen(
            self.cmd + self.args,
            cwd=str(self.flash),
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        ready = threading.Event()

        def pump():
            for line in self.p.stdout:
                if line.startswith("ready"):
                    ready.set()

        threading.Thread(target=pump, daemon=True).start()
        assert ready.wait(BOOT_S), "the board did not come up: %s" % self.p.stderr.read()
        return self

    def kill(self):
        self.p.kill()
        self.p.wait()

    def wait(self):
        assert self.p.wait(BOOT_S) == 0, self.p.stderr.read()

    def runs(self):
        try:
            return collections.Counter(int(x) for x in (self.flash / "runs.txt").read_text().split())
        except FileNotFoundError:
            return collections.Counter()

    def applied(self):
        try:
            return (self.flash / "applied.txt").read_text().splitlines()
        except FileNotFoundError:
            return []


@pytest.fixture
def board(board_lib, mosquitto, tmp_path, request):
    boards = []

    def make(name, extra_heap_kb=0):
        b = Board(board_lib, mosquitto, "%s-%d" % (name, os.getpid()), tmp_path, (), extra_heap_kb)
        boards.append(b)
        return b

    yield make
    for b in boards:
        if b.p is not None and b.p.poll() is None:
            b.kill()


@pytest.fixture
def op(mosquitto):
    with Operator(mosquitto.host, mosquitto.port) as o:
        yield o


def test_on_every_broker_a_command_waits_for_its_board_runs_once_and_desired_state_converges(
    broker, board_lib, tmp_path, make_observer
):
    """The topic and payload convention on MQTT 3.1.1 alone, on each broker of the matrix: a
    command answered; one sent while the board is away answered once it is back (its
    persistent session); a desired version applied and reported."""
    name = "matrix-%s-%d" % (broker.name, os.getpid())
    b = Board(board_lib, broker, name, tmp_path, (broker.USER, broker.PASSWORD))
    with Operator(broker.host, broker.port, user=broker.USER, password=broker.PASSWORD) as op:
        b.start()
        assert op.run([name], "add", {"a": 2, "b": 40}, timeout=30)[name]["result"] == 42
        op.run([name], "stop", timeout=30)
        b.wait()
        sent = op.send([name], "mark", {"n": 0})
        b.start()
        assert op.wait(sent, 60)[name]["status"] == "ok"
        v = op.set_desired([name], {"config": {"period_s": 15}})[name]
        assert op.wait_converged([name], 30) == [], op.drift([name])
        assert b.applied() == ["%d 15" % v]
        op.run([name], "stop", timeout=30)
        b.wait()
    assert b.runs() == {0: 1}
    # the session's broker serves other tests: its retained documents go (amqtt pushes every
    # retained message to every client that connects, subscribed or not)
    o = make_observer(broker, username=broker.USER, password=broker.PASSWORD)
    for t in ("fleet/%s/cmd/desired", "fleet/%s/reported"):
        o.publish(t % name, b"", qos=1, retain=True)


def test_on_mqtt_5_an_answer_carries_its_command_id_as_correlation_data(board, mosquitto):
    # a board on fleetwire.v5's client; an operator on MQTT 5 matches its answers by their
    # Correlation Data, one on 3.1.1 by the id in their payload. MQTT 5's client holds 10-11 KB
    # more than 3.1.1's (bench/heap.py), and this program is compiled in the heap: 16 KB more
    b = board("v5", extra_heap_kb=16)
    b.args.append("v5")
    b.start()
    with Operator(mosquitto.host, mosquitto.port, version=5) as op5:
        assert op5.run([b.name], "add", {"a": 1, "b": 2}, timeout=30)[b.name]["result"] == 3
        assert op5.correlated == 1
    with Operator(mosquitto.host, mosquitto.port) as op4:
        assert op4.run([b.name], "add", {"a": 2, "b": 2}, timeout=30)[b.name]["result"] == 4
        op4.run([b.name], "stop", timeout=30)
    b.wait()


def test_a_command_is_answered_with_its_result_or_an_error_that_says_why(board, op):
    b = board("answers").start()
    assert op.run([b.name], "add", {"a": 2, "b": 40}, timeout=30)[b.name]["result"] == 42
    a = op.run([b.name], "fail", timeout=30)[b.name]
    assert (a["status"], a["error"]) == ("error", "ValueError: asked to fail")
    a = op.run([b.name], "reboot-into-space", timeout=30)[b.name]
    assert a["status"] == "error" and "no command 'reboot-into-space'" in a["error"]
    op.run([b.name], "stop", timeout=30)
    b.wait()


def test_a_long_command_is_joined_on_flash_and_runs_and_one_past_the_heap_is_answered_why(board, op):
    # max_packet 1024 (the default): a longer command comes in pieces, written to flash as they
    # come and parsed from there, so only the parsed command takes heap (80 KB here, about 30 KB
    # of it free): 12 KB of text, 120 strings once parsed
    b = board("long").start()
    assert op.run([b.name], "size", {"blob": "x" * 2500}, timeout=30)[b.name]["result"] == 2500
    assert op.run([b.name], "size", {"blob": ["x" * 100] * 120}, timeout=30)[b.name]["result"] == 120
    assert not (b.flash / "cmd.json.in").exists()  # the joined text is gone once parsed
    a = op.run([b.name], "size", {"blob": "x" * 200000}, timeout=60)[b.name]
    assert a["status"] == "error", a
    assert re.fullmatch(
        r"no room in the heap for a command of 2000\d\d bytes: MemoryError: .*", a["error"]
    ), a
    assert op.run([b.name], "add", {"a": 1, "b": 2}, timeout=30)[b.name]["result"] == 3  # and on
    op.run([b.name], "stop", timeout=30)
    b.wait()


def test_a_desired_document_longer_than_max_packet_is_applied_and_reported_by_version(board, op):
    b = board("bigstate").start()
    v = op.set_desired([b.name], {"config": {"period_s": 20}, "notes": ["n" * 100] * 100})
    assert op.wait_converged([b.name], 30) == [], op.drift([b.name])
    assert b.applied()[-1] == "%d 20" % v[b.name]
    # its report would not fit max_packet: the version and the error say it converged
    assert op.reported(b.name) == {"version": v[b.name], "state": None, "error": None}
    op.set_desired([b.name], {"config": None, "notes": None})
    op.run([b.name], "stop", timeout=30)
    b.wait()


def test_a_command_past_its_deadline_is_answered_expired_and_not_run(board, op):
    b = board("expired").start()
    op.run([b.name], "stop", timeout=30)
    b.wait()  # the board is away; its session keeps what comes
    late = op.send([b.name], "mark", {"n": 1}, deadline_s=1)
    fresh = op.send([b.name], "mark", {"n": 2}, deadline_s=600)
    time.sleep(2.5)
    b.start()
    got = op.wait({**late, **fresh}, timeout=30)
    assert got[b.name]  # (both answered: one dict per board keeps the last; check by id)
    by_id = {i: op.answers[i][1] for i in list(late) + list(fresh)}
    assert by_id[next(iter(late))]["status"] == "expired"
    assert by_id[next(iter(fresh))]["status"] == "ok"
    assert b.runs() == {2: 1}
    op.run([b.name], "stop", timeout=30)
    b.wait()


def test_commands_sent_while_the_board_is_away_wait_at_the_broker_and_run_once_each(board, op):
    b = board("away").start()
    op.run([b.name], "stop", timeout=30)
    b.wait()
    sent = {}
    for n in range(5):
        sent.update(op.send([b.name], "mark", {"n": n}))
    b.start()
    # wait() ends when each command is answered (five to one board), not at its timeout
    got, progress = [], []
    waiter = threading.Thread(
        target=lambda: got.append(op.wait(sent, 3600, lambda *p: progress.append(p))), daemon=True
    )
    waiter.start()
    waiter.join(120)  # a guard against a hang: an hour is the timeout it must not wait out
    assert not waiter.is_alive() and progress[-1] == (5, 5), progress
    assert list(got[0]) == [b.name] and all(i in op.answers for i in sent)
    assert b.runs() == {n: 1 for n in range(5)}
    op.run([b.name], "stop", timeout=30)
    b.wait()


def test_a_board_killed_while_commands_arrive_runs_none_twice_and_answers_every_one(board, op):
    b = board("killed").start()
    sent = {}
    for n in range(30):
        sent.update(op.send([b.name], "mark", {"n": n}))
        if n == 12:
            b.kill()  # a power cut, mid-stream: what was not acknowledged comes again
            b.start()
    op.wait(sent, 60)
    answers = [op.answers[i][1] for i in sent if i in op.answers]
    assert len(answers) == 30, "%d of 30 answered" % len(answers)
    runs = b.runs()
    assert all(c == 1 for c in runs.values()), runs
    for a in answers:  # ok: it ran once; interrupted: the cut came while it ran, never again
        assert a["status"] in ("ok", "interrupted"), a
        if a["status"] == "ok":
            assert runs[a["result"]] == 1
    op.run([b.name], "stop", timeout=30)
    b.wait()


def test_desired_state_converges_after_an_outage_and_is_not_applied_again_after_a_reboot(board, op):
    b = board("state").start()
    assert op.wait_converged([b.name], 30) == []  # version 0: nothing desired yet
    op.run([b.name], "stop", timeout=30)
    b.wait()
    op.set_desired([b.name], {"config": {"period_s": 30}})
    v = op.set_desired([b.name], {"config": {"period_s": 10}})[b.name]
    b.start()
    assert op.wait_converged([b.name], 30) == [], op.drift([b.name])
    assert op.reported(b.name)["version"] == v
    # what the session held comes in order (each version once, none older), the newest last
    applied = b.applied()
    versions = [int(x.split()[0]) for x in applied]
    assert versions == sorted(set(versions)) and applied[-1] == "%d 10" % v, applied
    op.run([b.name], "stop", timeout=30)
    b.wait()
    b.start()  # the retained document again at the subscribe: the same version, not applied
    time.sleep(1)
    assert b.applied() == applied
    op.set_desired([b.name], {"config": None})  # clean up the retained document's section
    op.run([b.name], "stop", timeout=30)
    b.wait()


def sweep(p, exchange):
    """One clean exchange measures it; then a cut at each of its byte offsets, each way, and
    after each of its packets, an exchange after each -> the cut points."""
    p.wait_quiet(0.2)
    before = (p.bytes("up"), p.bytes("down"))
    conn = p.accepted
    exchange()
    up, down = p.bytes("up") - before[0], p.bytes("down") - before[1]
    packets = [x for x in p.packets(conn) if x[1] in ("PUBLISH", "PUBACK")][-4:]
    points = [("up", {"at": n}) for n in range(up)] + [("down", {"at": n}) for n in range(down)]
    seen = collections.Counter()
    for direction, name in packets:
        seen[(direction, name)] += 1
        points.append((direction, {"after": name, "nth": seen[(direction, name)]}))
    for direction, where in points:
        p.cut(direction, **where)
        exchange()
    assert p.cuts >= len(points) - 2  # a cut armed past the exchange's end may not fire
    return points


def test_a_cut_at_every_byte_of_a_command_exchange_runs_each_command_once_and_answers_it(
    board, op, make_proxy
):
    """The board behind the fault proxy: its link cut (RST) at every byte offset of a whole
    exchange, the command down with its PUBACK up and the answer up with its PUBACK down, and
    after every packet of it; the client reconnects by itself and every command runs once and
    is answered once, ok."""
    p = make_proxy()
    b = board("cuts")
    b.args[:2] = ["127.0.0.1", str(p.port)]  # the proxy listens on loopback
    b.start()
    sent = {}

    def exchange():
        n = len(sent)
        s = op.send([b.name], "mark", {"n": n})
        sent.update(s)
        got = op.wait(s, 30)
        assert got.get(b.name, {}).get("status") == "ok", (n, got)
        assert p.wait_quiet(0.05)

    points = sweep(p, exchange)
    assert len(points) > 150, points
    op.run([b.name], "stop", timeout=30)
    b.wait()
    runs = b.runs()
    assert runs == {n: 1 for n in range(len(sent))}, [n for n, c in runs.items() if c != 1]
    assert all(i in op.answers for i in sent)


def test_a_cut_at_every_byte_of_a_state_update_converges_and_applies_each_version_once(board, op, make_proxy):
    """The same sweep over a desired-state update (the retained document down with its PUBACK,
    the reported state up with its PUBACK): after each cut the board reports the newest
    version, and its handler saw each version at most once, in order."""
    p = make_proxy()
    b = board("statecuts")
    b.args[:2] = ["127.0.0.1", str(p.port)]
    b.start()
    last = [0]

    def exchange():
        last[0] = op.set_desired([b.name], {"config": {"period_s": last[0] + 1}})[b.name]
        assert op.wait_converged([b.name], 30) == [], op.drift([b.name])
        assert p.wait_quiet(0.05)

    points = sweep(p, exchange)
    assert len(points) > 100, points
    op.run([b.name], "stop", timeout=30)
    b.wait()
    versions = [int(x.split()[0]) for x in b.applied()]
    assert versions == sorted(set(versions)) and versions[-1] == last[0], versions
    op.set_desired([b.name], {"config": None})


def fleetwire(*args):
    import sys

    r = subprocess.run(
        [sys.executable, "-m", "fleetwire.tools.cli"] + list(args),
        capture_output=True,
        text=True,
        timeout=120,
    )
    return r.returncode, r.stdout, r.stderr


def test_fleetwire_cmd_and_state_reach_the_boards_of_a_group_and_say_which_did_not_answer(
    board, mosquitto, tmp_path
):
    b = board("cli").start()
    devices = tmp_path / "fleet.txt"
    devices.write_text("%s,eu\nnowhere-%d,eu\nelsewhere,us\n" % (b.name, os.getpid()))
    where = [
        "--devices",
        str(devices),
        "--group",
        "eu",
        "--broker",
        "%s:%d" % (mosquitto.host, mosquitto.port),
    ]
    rc, out, err = fleetwire("cmd", "add", "--args", '{"a": 1, "b": 2}', "--timeout", "10", *where)
    assert rc == 1, (out, err)  # one board of the group never answered
    assert "%s: ok 3" % b.name in out and "nowhere-%d: no answer within 10 s" % os.getpid() in out
    assert "elsewhere" not in out and "1/2 answered" in err
    one = ["--device", b.name, "--broker", "%s:%d" % (mosquitto.host, mosquitto.port)]
    rc, out, err = fleetwire("state", "set", "config", '{"period_s": 5}', "--wait", "30", *one)
    assert rc == 0 and "1/1 applied" in err, (out, err)
    rc, out, err = fleetwire("state", "drift", *one)
    assert rc == 0 and "0 of 1 boards drift" in out, (out, err)
    rc, out, err = fleetwire("cmd", "add", "--args", "{not json", *one)
    assert rc == 2 and "fleetwire cmd:" in err
    fleetwire("state", "set", "config", "null", *one)
    fleetwire("cmd", "stop", "--timeout", "30", *one)
    b.wait()

"""Crash capture on the board (fleetwire.crash, fleetwire.crashsend), on the MicroPython unix
port from the board tree as .mpy (80 KB heap): every uncaught exception is recorded with its
type, message, traceback and the log's last lines, without allocating; the record outlives a
reset and not a power cut; on flash, a power cut at any write leaves it whole or absent.
The device side is tests/device/crash_program.py."""

import json
import os
import subprocess

import pytest

from fleetwire.host.fleet.crashrec import parse
from fleetwire.host.portable import PATH as PORTABLE
from fleetwire.host.rig.vboard import EMUL
from support import device_command

PROGRAM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "crash_program.py")
pytestmark = pytest.mark.micropython


def run(board_lib, *args, heap_kb=0, cwd=None, env_extra=None, path_first=None):
    cmd, env = device_command("micropython", board_lib, PROGRAM, heap_kb)
    env["MICROPYPATH"] += os.pathsep + PORTABLE
    if path_first:
        env["MICROPYPATH"] = path_first + os.pathsep + env["MICROPYPATH"]
    env.update(env_extra or {})
    r = subprocess.run(
        cmd + [str(a) for a in args], capture_output=True, text=True, env=env, cwd=cwd, timeout=60
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ALLOCATED" not in r.stdout, r.stdout  # the crash path allocated
    return r.stdout.splitlines()


def records(lines):
    return [parse(bytes.fromhex(x[4:])) for x in lines if x.startswith("REC ")]


def lcg(seed):
    x = seed
    while True:
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF
        yield x


TYPES = ("KeyError", "ZeroDivisionError", "ValueError", "IndexError")


def test_exceptions_raised_at_random_points_are_recorded_without_allocating(board_lib):
    out = run(board_lib, "random", 7, 12)
    recs = records(out)
    assert len(recs) == 12
    # the program's random choices, replayed: the log lines and each raise's depth and kind
    rnd, logged, cut = lcg(7), [], 0
    for i, r in enumerate(recs):
        for j in range(next(rnd) % 7):
            logged.append(("step %d line %d of a long log line that is cut" % (i, j))[:24])
        depth, kind = next(rnd) % 6, next(rnd) % 4
        assert r["kind"] == "exception"
        assert r["type"] == TYPES[kind], r
        assert (r["fw_version"], r["boot_id"]) == ("2.0.1", 17)
        assert r["log"] == logged[-4:]  # the ring's last lines, oldest first, each cut to its width
        tb = r["traceback"]
        # every frame, innermost last; a traceback too long for the record keeps its end
        assert tb.startswith("Traceback (most recent call last):\n") or tb.startswith("..."), tb
        whole = tb.startswith("Traceback")
        assert tb.count(", in middle\n") == depth + 1 or not whole
        assert tb.endswith(", in leaf\n%s: %s\n" % (r["type"], r["message"])) or kind == 2, tb
        cut += not whole
        if kind == 2:  # a long message: cut at 96 bytes with its type, and in the traceback
            assert r["message"].startswith("bad reading xxx") and len(r["type"] + r["message"]) <= 94
        assert r["heap_free"] > 20000
        if i:
            assert r["crash_id"] == (recs[i - 1]["crash_id"] + 1) & 0xFFFF  # ids go on
    assert 0 < cut < 12  # some tracebacks were too long for the record, some not


def test_a_memory_error_under_real_heap_pressure_is_recorded(board_lib):
    out = run(board_lib, "memory")
    free = int([x for x in out if x.startswith("FREE ")][0].split()[1])
    assert free < 256  # taken with the heap full
    (r,) = records(out)
    assert r["type"] == "MemoryError" and r["message"].startswith("memory allocation failed")
    assert r["heap_free"] < 256
    assert r["log"] == ["filling the heap"]


def test_print_feeds_the_log_ring_with_crashprint(board_lib):
    out = run(board_lib, "print")
    assert "reading 3 of 5" in out  # the console still has it
    (r,) = records(out)
    assert r["log"] == ["reading 3 of 5", "logged", "x" * 32]  # each cut to the ring's width


def test_an_asyncio_task_that_ends_with_an_exception_is_recorded_and_resets(board_lib):
    out = run(board_lib, "asyncio")
    assert "RESET reset" in out  # on a board, machine.reset()
    (r,) = records(out)
    assert r["type"] == "OSError" and "110" in r["message"]
    assert ", in sensor\n" in r["traceback"]


def test_an_exception_in_a_callback_is_recorded_by_run(board_lib, mosquitto):
    out = run(board_lib, "callback", mosquitto.host, mosquitto.port)
    assert "RESET reset" in out
    (r,) = records(out)
    assert r["type"] == "ValueError" and "not a number" in r["message"]
    assert ", in on_message\n" in r["traceback"] and ", in main\n" in r["traceback"]
    assert r["log"] == ["not a number"]
    assert r["boot_id"] == 5


def test_the_record_outlives_a_reset_not_a_power_cut_and_resets_are_recorded(board_lib, tmp_path):
    # the virtual board's machine (host/rig/emul): RTC memory in a file that a power-on removes
    vb, fs = tmp_path / "vb", tmp_path / "fs"
    vb.mkdir()
    fs.mkdir()

    def boot(n, cause, what="keep"):
        (vb / "vboard.json").write_text(json.dumps({"reset_cause": cause}))
        if cause == "power_on" and (vb / "rtc").exists():
            (vb / "rtc").unlink()  # what the virtual board does at a power-on
        out = run(
            board_lib,
            "boot",
            "crash",
            n,
            what,
            cwd=str(fs),
            path_first=EMUL,
            env_extra={"FLEETWIRE_VBOARD": str(vb)},
        )
        return [x.split()[1] for x in out if x.startswith("KEPT ")]

    def kept():
        d = fs / "crash"
        return {f: parse((d / f).read_bytes()) for f in sorted(os.listdir(d))} if d.exists() else {}

    assert boot(1, "soft") == ["None"]  # a deliberate reset: nothing to record
    boot(1, "soft", "fail")  # boot 1 dies of a KeyError; the runner's reset (machine.reset) follows
    assert (vb / "rtc").exists()
    assert boot(2, "soft") == ["exception"]  # boot 2 moves it to flash
    (r,) = kept().values()
    assert (r["kind"], r["type"], r["message"], r["boot_id"]) == ("exception", "KeyError", "boot1", 1)
    assert r["log"] == ["about to fail"] and r["fw_version"] == "2.0.1"
    assert boot(3, "soft") == ["None"]  # moved once: the next boot finds nothing new
    boot(3, "soft", "fail")
    assert boot(4, "power_on") == ["power_on"]  # a power cut before the move: the record went with it
    assert [r["kind"] for r in kept().values()] == ["exception", "power_on"]
    assert boot(5, "watchdog") == ["watchdog"]
    assert boot(6, "hard") == ["panic"]  # a reset machine.reset_cause() cannot tell: a panic
    got = list(kept().values())
    assert [(r["kind"], r["boot_id"]) for r in got] == [
        ("exception", 1),
        ("power_on", 3),
        ("watchdog", 4),
        ("panic", 5),
    ]
    assert all(r["traceback"] is None and r["log"] == [] for r in got[1:])


def test_a_power_cut_at_every_flash_write_leaves_each_record_whole_or_absent(board_lib):
    # keep() moving a record to LittleFS on an emulated NOR flash, with an older one waiting,
    # then the older one's removal after its upload: cut at each program and erase, then
    # both what the power cut leaves (RTC memory lost) and a soft reset there (kept) recover
    out = run(board_lib, "sweep", heap_kb=220)
    cuts, bad = map(int, [x for x in out if x.startswith("SWEEP ")][0].split()[1:])
    assert bad == 0, out
    assert cuts >= 5


def test_a_record_rtc_memory_cannot_hold_is_refused_at_install_not_at_the_crash():
    from fleetwire import crashrun

    for size, lines, width in [(4096, 8, 64), (128, 2, 16), (1024, 16, 64), (1024, 0, 64)]:
        with pytest.raises(ValueError):
            crashrun.install("1.0.0", 1, lines, width, size)


def record(size=1024, lines=4, width=32, tb_frames=30):
    # a record as catch() leaves it, its traceback long (frames f0..fN, innermost last)
    import struct

    from fleetwire.host.fleet.crashrec import sum16

    release, msg = b"2.0.1", b"ZeroDivisionError: divide by zero"
    tb = b"Traceback (most recent call last):\n"
    tb += b"".join(b'  File "app.py", line 1, in f%d\n' % i for i in range(tb_frames)) + msg + b"\n"
    b = bytearray(size)
    ring = size - lines * width
    r, m = 32 + len(release), 32 + len(release) + len(msg)
    tb = tb[-(ring - m) :]  # what fits, as catch() keeps it
    t = m + len(tb)
    b[0:2] = b"FC"
    struct.pack_into("<HHHIIII", b, 2, 9, t, 0, 17, 60, 30000, 0)
    b[25], b[26] = lines, width
    struct.pack_into("<HH", b, 28, r, m)
    b[32:t] = release + msg + tb
    b[ring : ring + 4] = b"last"
    struct.pack_into("<H", b, 6, sum16(b))
    return bytes(b)


def test_a_record_is_sent_in_the_room_the_client_has_its_traceback_cut_at_the_head():
    from fleetwire.crashsend import fit

    whole = parse(record(tb_frames=3), "d")
    sent = fit(record(tb_frames=3), 10000)
    assert parse(sent, "d") == whole and len(sent) < 1024  # the free bytes stay home
    long = parse(record(), "d")
    for room in (1000, 600, 300):  # max_packet less the topic and the packet's head
        sent = fit(record(), room)
        got = parse(sent, "d")
        assert len(sent) <= room and got["log"] == long["log"] == ["last"]
        assert got["traceback"].startswith("...") and got["traceback"].endswith(
            ", in f29\nZeroDivisionError: divide by zero\n"
        )
        assert (got["type"], got["crash_id"], got["boot_id"]) == ("ZeroDivisionError", 9, 17)

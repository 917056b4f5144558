"""The virtual board (`fleetwire vboard`, fleetwire.host.rig.vboard): the MicroPython unix
port behind a pty that mpremote and pyserial use as a USB board; emulated machine,
network and esp32 modules; restarts on machine.reset() with the terminal still open."""

import os
import subprocess
import sys
import time

import pytest
import serial

from fleetwire.host.rig.vboard import VirtualBoard, wait_for_prompt


def mpremote(port, *args, timeout=30):
    r = subprocess.run(
        [sys.executable, "-m", "mpremote", "connect", port, "resume"] + list(args),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return r.returncode, r.stdout.strip(), r.stderr.strip()


@pytest.fixture
def board(tmp_path):
    b = VirtualBoard(str(tmp_path / "b1"), link=str(tmp_path / "tty-b1")).start()
    assert wait_for_prompt(b.port)
    yield b
    b.stop()


def test_mpremote_runs_code_and_copies_files_as_on_a_usb_board(board, tmp_path):
    rc, out, err = mpremote(board.link, "exec", "import sys; print(sys.implementation.name)")
    assert (rc, out) == (0, "micropython"), err
    script = tmp_path / "hello.py"
    script.write_text("print('hello', 6 * 7)\n")
    assert mpremote(board.link, "run", str(script))[1] == "hello 42"
    rc, out, err = mpremote(board.link, "fs", "cp", str(script), ":hello.py", "+", "fs", "ls")
    assert rc == 0 and "hello.py" in out, err
    assert (tmp_path / "b1" / "fs" / "hello.py").read_text() == script.read_text()  # its filesystem


def test_mpremote_without_resume_soft_resets_first_as_on_a_board(board, tmp_path):
    # mpremote's default: Ctrl-D in the raw REPL, then wait for "soft reboot" and the
    # raw REPL again. On a board that soft reset runs boot.py but not main.py.
    with open(os.path.join(board.fs, "boot.py"), "w") as f:
        f.write("open('boots', 'a').write('b')\n")
    with open(os.path.join(board.fs, "main.py"), "w") as f:
        f.write("open('mains', 'a').write('m')\n")
    script = tmp_path / "x.py"
    script.write_text("print(6 * 7)\n")
    for args in (["exec", "x = 6 * 7; print(x)"], ["run", str(script)], ["fs", "ls"]):
        r = subprocess.run(
            [sys.executable, "-m", "mpremote", "connect", board.link] + args,
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert r.returncode == 0, r.stdout + r.stderr
        assert ("42" in r.stdout) == (args[0] != "fs"), r.stdout
    r = subprocess.run(
        [sys.executable, "-m", "mpremote", "connect", board.link, "exec", "print(x)"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert "NameError" in r.stdout + r.stderr  # a soft reset: nothing survives from the last command
    assert board.resets == 4
    assert open(os.path.join(board.fs, "boots")).read() == "bbbb"
    assert not os.path.exists(os.path.join(board.fs, "mains"))
    assert mpremote(board.link, "exec", "print('still', 1)")[1] == "still 1"  # and resume still works
    # mpremote left with Ctrl-B: a Ctrl-D at the friendly prompt is a full soft reset again
    with serial.Serial(board.port, 115200, timeout=0.2) as s:
        s.write(b"\r\x04")
        end = time.monotonic() + 10
        while not os.path.exists(os.path.join(board.fs, "mains")) and time.monotonic() < end:
            s.read(256)
    assert open(os.path.join(board.fs, "mains")).read() == "m"


def test_absolute_paths_are_the_boards_own_files_as_on_a_board(board):
    # "/store" on a board is its flash; on a virtual board it is fs/store, never the host's /
    name = "probe-%d" % os.getpid()
    rc, out, err = mpremote(
        board.link,
        "exec",
        "import os; os.mkdir('/%s'); open('/%s/x', 'w').write('on the board'); "
        "print(os.getcwd(), 'lib' in os.listdir('/'))" % (name, name),
    )
    assert (rc, out) == (0, "/ True"), err
    assert (open(os.path.join(board.fs, name, "x")).read()) == "on the board"
    assert not os.path.exists("/" + name)


def _say(s, data, want, timeout=5):
    """Write data to the port, then read until `want` (or the timeout): what was read."""
    s.write(data)
    got, end = b"", time.monotonic() + timeout
    while want not in got and time.monotonic() < end:
        got += s.read(64)
    return got


def test_pyserial_talks_to_the_repl(board):
    with serial.Serial(board.port, 115200, timeout=2) as s:
        s.write(b"\x03\r")
        time.sleep(0.2)
        s.reset_input_buffer()
        got = _say(s, b"print(6 * 7)\r", b"42")
    assert b"42" in got


def test_ctrl_c_at_the_repl_cancels_the_line_and_a_running_program_sees_keyboardinterrupt(board):
    # as on a board: at the prompt Ctrl-C drops the line being typed (the interpreter and
    # its variables stay); while code runs it raises KeyboardInterrupt there
    with serial.Serial(board.port, 115200, timeout=0.2) as s:
        assert b">>> " in _say(s, b"x = 42\r", b">>> ")
        assert b"half a li" in _say(s, b"print('half a li", b"half a li")
        assert b">>> " in _say(s, b"\x03", b">>> ")
        # it prints 1001 once it runs (the echo of the line holds "1 + 1000", not the sum)
        assert b"1001" in _say(
            s, b"import time\rexec('print(1 + 1000)\\nwhile True: time.sleep(0.05)')\r", b"1001"
        )
        assert b"KeyboardInterrupt" in _say(s, b"\x03", b"KeyboardInterrupt")
        assert b"43" in _say(s, b"print(x + 1)\r", b"43")
    assert board.boots == 1 and board.resets == 0


def test_machine_reset_restarts_the_board_and_the_port_stays_open(board):
    rc, out, _ = mpremote(
        board.link, "exec", "import machine; print(machine.unique_id().hex(), machine.reset_cause())"
    )
    uid, cause = out.split()
    assert cause == "1"  # PWRON_RESET
    mpremote(board.link, "reset")  # mpremote's own: machine.reset(), not waiting for an answer
    end = time.monotonic() + 10
    while board.resets < 1 and time.monotonic() < end:
        time.sleep(0.05)
    assert board.resets == 1 and os.path.realpath(board.link) == board.port
    rc, out, _ = mpremote(
        board.link, "exec", "import machine; print(machine.unique_id().hex(), machine.reset_cause())"
    )
    assert out.split() == [uid, "5"]  # same board, SOFT_RESET


def test_main_py_runs_at_boot_and_ctrl_c_from_mpremote_stops_it(board):
    with open(os.path.join(board.fs, "main.py"), "w") as f:
        f.write("import time\nopen('ran', 'w').write('yes')\nwhile True:\n    time.sleep(0.05)\n")
    board.power_cycle()
    end = time.monotonic() + 10
    while not os.path.exists(os.path.join(board.fs, "ran")) and time.monotonic() < end:
        time.sleep(0.05)
    assert os.path.exists(os.path.join(board.fs, "ran"))
    rc, out, err = mpremote(board.link, "exec", "print('interrupted main, got the REPL')")
    assert out == "interrupted main, got the REPL", err


def test_a_program_printing_on_a_board_nobody_watches_runs_on(board):
    # as on a board's UART with nobody listening: the output is lost, the program is not
    # held up (a pty nobody reads fills after 4 KB and would stop the interpreter)
    with open(os.path.join(board.fs, "main.py"), "w") as f:
        f.write(
            "for i in range(3000):\n    print('line %05d ' % i + 'x' * 60)\nopen('done', 'w').write('1')\n"
            "print('all printed')\n"
        )
    board.power_cycle()
    end = time.monotonic() + 20
    while not os.path.exists(os.path.join(board.fs, "done")) and time.monotonic() < end:
        time.sleep(0.05)
    assert os.path.exists(os.path.join(board.fs, "done")), "the board stalled on output nobody read"
    # whoever opens the port later gets the newest output, then the REPL
    with serial.Serial(board.port, 115200, timeout=0.5) as s:
        seen = b""
        while b"all printed" not in seen and time.monotonic() < end:
            seen += s.read(4096)
    assert b"all printed" in seen and b"line 02999" in seen


def test_output_is_not_lost_while_someone_reads_the_port_slowly(board):
    # a slow reader holds the program up instead (mpremote's transfers rely on it)
    with open(os.path.join(board.fs, "main.py"), "w") as f:
        f.write("for i in range(800):\n    print('line %05d ' % i + 'x' * 60)\nprint('end')\n")
    with serial.Serial(board.port, 115200, timeout=0.2) as s:
        board.power_cycle()
        seen = b""
        end = time.monotonic() + 30
        while b"\nend" not in seen and time.monotonic() < end:
            seen += s.read(2048)
            time.sleep(0.1)  # 2 KB per 0.1 s: far slower than the board prints
    lines = [int(l.split()[1]) for l in seen.decode(errors="replace").splitlines() if l.startswith("line ")]
    assert lines == list(range(800))


def test_wifi_fails_on_demand_and_flash_survives_a_power_cycle(board):
    code = (
        "import network; w = network.WLAN(network.STA_IF); w.active(True); w.connect('lab', 'pw'); "
        "print(w.isconnected())"
    )
    assert mpremote(board.link, "exec", code)[1] == "True"
    board.set_wlan(False)
    assert mpremote(board.link, "exec", code)[1] == "False"
    mpremote(
        board.link,
        "exec",
        "import esp32; p = esp32.Partition.find(esp32.Partition.TYPE_DATA, label='mqtt')[0]; "
        "p.writeblocks(1, b'kept', 10)",
    )
    board.power_cycle()
    rc, out, _ = mpremote(
        board.link,
        "exec",
        "import esp32; p = esp32.Partition.find(esp32.Partition.TYPE_DATA, "
        "label='mqtt')[0]; b = bytearray(6); p.readblocks(1, b, 9); print(b, p.ioctl(4, 0))",
    )
    assert out == "bytearray(b'\\xffkept\\xff') 64"


def test_the_command_line_starts_several_boards_and_stops_them_all(tmp_path):
    import signal

    p = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "fleetwire.tools.cli",
            "vboard",
            "--count",
            "2",
            "--dir",
            str(tmp_path / "boards"),
            "--link",
            str(tmp_path / "tty"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines = [p.stdout.readline() for _ in range(2)]
    assert lines[0].startswith("board-1: /dev/pts/") and lines[1].startswith("board-2: ")
    for i in (1, 2):
        assert mpremote(str(tmp_path / ("tty%d" % i)), "exec", "print('board', %d)" % i)[1] == "board %d" % i
    pids = subprocess.run(
        ["pgrep", "-f", str(tmp_path / "boards")], capture_output=True, text=True
    ).stdout.split()
    assert len(pids) >= 2
    p.send_signal(signal.SIGTERM)
    out, _ = p.communicate(timeout=20)
    assert "stopped 2 board(s)" in out
    time.sleep(0.3)
    assert (
        subprocess.run(["pgrep", "-f", str(tmp_path / "boards")], capture_output=True, text=True).stdout == ""
    )

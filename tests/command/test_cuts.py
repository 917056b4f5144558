"""A power cut at every flash operation of the command journal and of the state file, on
MicroPython with LittleFS on an emulated NOR flash (cut_program.py), each cut clean and
half-way: after the boot no command runs twice, every one is answered, each answer the same
every time it is sent; the state never goes back, no version is applied twice, and it
converges to the newest."""

import json
import os
import re
import subprocess

from fleetwire.host.rig import micropython
from fleetwire.host.portable import PATH as PORTABLE

HERE = os.path.dirname(os.path.abspath(__file__))


def run(board_lib, tmp_path, what):
    env = dict(os.environ)
    env["MICROPYPATH"] = os.pathsep.join([PORTABLE, board_lib, ".frozen"])
    r = subprocess.run(
        [micropython.binary(), "-X", "heapsize=512K", os.path.join(HERE, "cut_program.py"), what],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=str(tmp_path),
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return r.stdout


def test_a_cut_at_every_flash_operation_of_the_journal_runs_no_command_twice_and_answers_each(
    board_lib, tmp_path
):
    out = run(board_lib, tmp_path, "cmd")
    m = re.search(r"done cmd ops=(\d+) cuts=(\d+) resent=(\d+) interrupted=(\d+)", out)
    assert m, out[-2000:]
    ops, cuts, resent, interrupted = (int(x) for x in m.groups())
    assert ops >= 10 and cuts == 2 * ops  # every operation, cut cleanly and half-way
    assert resent > 0  # answers not acknowledged before the cut went again, the same
    assert 0 < interrupted < cuts  # a cut while a command ran says so; the others run it


def test_a_cut_at_every_flash_operation_of_the_state_file_never_goes_back_nor_applies_twice(
    board_lib, tmp_path
):
    out = run(board_lib, tmp_path, "state")
    m = re.search(r"done state ops=(\d+) cuts=(\d+) boots=(.*)", out)
    assert m, out[-2000:]
    ops, cuts = int(m.group(1)), int(m.group(2))
    assert ops >= 4 and cuts == 2 * ops
    boots = dict(eval(m.group(3)))  # noqa: S307 - our own program's list of (version, count)
    assert len(boots) > 2  # cuts left the old document and the new, each whole


def test_a_long_command_the_flash_has_no_room_for_is_answered_why_and_the_next_runs(board_lib, tmp_path):
    out = run(board_lib, tmp_path, "full")
    m = re.search(r"answers (.*) ran (.*) left (.*)", out)
    assert m, out[-2000:]
    answers, ran, left = json.loads(m.group(1)), eval(m.group(2)), eval(m.group(3))  # noqa: S307
    (big,) = answers["big"]
    assert big["status"] == "error" and big["error"].startswith("no room on flash for a command of 20"), big
    assert "OSError" in big["error"], big
    assert ran[0] == 0 and ran[1] == 1  # the long one did not run; the next did
    assert [a["status"] for a in answers["c1"]] == ["ok"]
    assert sorted(left) == ["cmd.json", "filler"]  # the pieces' file is gone

"""A power cut at every flash operation of an app update, on MicroPython with LittleFS on an
emulated NOR flash (cut_program.py): in the middle of writing a chunk, of recording the
download, of checking it, of unpacking it and of the switch. Each time the board boots one
whole release, and the update resumes from what is on flash."""

import os
import re
import subprocess

from fleetwire.host.rig import micropython
from fleetwire.host.rollout.release import Release, pack
from fleetwire.host.portable import PATH as PORTABLE


HERE = os.path.dirname(os.path.abspath(__file__))


def small_release():
    # a bundle of a few files, so that a cut at every one of its flash operations stays quick
    files = {
        "app.py": b"VERSION = '2.0.0'\n" + b"# padding\n" * 60,
        "lib/helper.py": bytes(range(256)) * 6,
        "lib/pkg/mod.py": b"X = 1\n" * 150,
        ".fwversion": b"2.0.0",
    }
    return Release.from_bytes(pack(files), chunk=512)


def run_cuts(board_lib, tmp_path, keys, *args, deployed=None):
    """cut_program.py on a board deployed with the key set `deployed` (default: keys')."""
    rel = small_release()
    (tmp_path / "bundle.bin").write_bytes(rel.data)
    (tmp_path / "offer.json").write_bytes(keys.signer().sign(rel.manifest()))
    (tmp_path / "keys.json").write_bytes(deployed or keys.board_file())
    env = dict(os.environ)
    env["MICROPYPATH"] = os.pathsep.join([PORTABLE, board_lib, ".frozen"])
    r = subprocess.run(
        [
            micropython.binary(),
            "-X",
            "heapsize=1M",
            os.path.join(HERE, "cut_program.py"),
            str(tmp_path / "bundle.bin"),
            str(tmp_path / "offer.json"),
            str(tmp_path / "keys.json"),
        ]
        + list(args),
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=str(tmp_path),
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return rel, r.stdout


def test_a_cut_at_every_flash_operation_boots_one_whole_release_and_the_update_resumes(
    board_lib, tmp_path, release_keys
):
    rel, out = run_cuts(board_lib, tmp_path, release_keys, "1", "partial")
    m = re.search(r"done ops=(\d+) cuts=(\d+) old=(\d+) new=(\d+) resumed_mid=(\d+)", out)
    assert m, out[-2000:]
    ops, cuts, old, new, resumed_mid = (int(x) for x in m.groups())
    assert cuts == 2 * ops  # every operation, cut cleanly and cut half-way
    assert old + new == cuts  # each boot ran one whole release (checked file by file)
    assert old and new  # cuts before the switch keep the old, after it run the new
    # a cut in the middle of the download resumes from what was on flash, not from zero
    assert resumed_mid > 0
    lines = [x.split() for x in out.splitlines() if x.startswith("cut ")]
    offsets = [int(x[4]) for x in lines if x[4].isdigit()]
    assert max(offsets) >= rel.size - 512  # cuts late in the download resume near its end


def test_a_cut_at_every_flash_operation_of_a_firmware_download_resumes_and_the_slot_holds_the_image(
    board_lib, tmp_path
):
    # chunks that straddle the 4 KB blocks, so that cuts fall inside a block's first write,
    # in the middle of one, and on an erase
    img = bytes((i * 31 + 7) & 0xFF for i in range(3 * 4096 + 1234))
    (tmp_path / "img.bin").write_bytes(img)
    env = dict(os.environ)
    env["MICROPYPATH"] = os.pathsep.join([PORTABLE, board_lib, ".frozen"])
    r = subprocess.run(
        [
            micropython.binary(),
            "-X",
            "heapsize=512K",
            os.path.join(HERE, "fw_cut_program.py"),
            str(tmp_path / "img.bin"),
            "1000",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=str(tmp_path),
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    m = re.search(r"done ops=(\d+) cuts=(\d+) resumed_mid=(\d+)", r.stdout)
    ops, cuts, resumed_mid = (int(x) for x in m.groups())
    assert ops == 4 + 14 and cuts == 2 * ops  # 4 erases, 14 chunks: every one cut, cleanly and half-way
    starts = [int(x.split()[3]) for x in r.stdout.splitlines() if x.startswith("cut ")]
    # resumed where the offset on file said, or at the start of a block a torn write had touched
    assert resumed_mid > 0 and all(s % 1000 == 0 or s % 4096 == 0 for s in starts)
    assert any(s % 1000 and s % 4096 == 0 for s in starts)  # a torn block written again from its start


def test_a_cut_at_every_flash_operation_of_a_key_update_leaves_one_whole_key_set(board_lib, tmp_path):
    from fleetwire.host.identity.signing import ReleaseKeys

    keys = ReleaseKeys.create(str(tmp_path / "release"))
    deployed = keys.board_file()
    keys.rotate()  # set 2: the old key and a new one, signed by the old
    (tmp_path / "update.json").write_bytes(keys.update())
    _, out = run_cuts(board_lib, tmp_path, keys, "keys", str(tmp_path / "update.json"), deployed=deployed)
    m = re.search(r"done keys ops=(\d+) cuts=(\d+) old=(\d+) new=(\d+)", out)
    assert m, out[-2000:]
    ops, cuts, old, new = (int(x) for x in m.groups())
    assert ops >= 2 and cuts == 2 * ops  # the new file and its rename, every one cut cleanly and half-way
    assert old + new == cuts and old and new  # one whole set at each boot: the old before the rename

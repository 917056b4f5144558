"""Signed releases, on the board: fleetwire.ota on the MicroPython unix port (the board tree as
.mpy, a small heap, its records in files under ota/) takes an offer, a key update or an order
back only when a release-signing key it holds signed it (fleetwire.ota.trust), signed here on
the host as `fleetwire rollout` and `fleetwire release` sign them (fleetwire.host.identity.signing).
Each step of trust_program.py says what the board made of a message: its vitals' ota member,
whether it asked for chunks, whether it switched, which release runs, which key set it holds,
and which fleetwire.ota modules stay loaded (the check is loaded for a message, then dropped)."""

import json
import os
import subprocess

import pytest

from fleetwire.host.rig import micropython
from fleetwire.host.identity.signing import ReleaseKeys, Signer, new_key
from fleetwire.host.rollout.release import Release, pack

HERE = os.path.dirname(os.path.abspath(__file__))
# The heap the program runs in: the updater, an offer's JSON, the check (RSA-3072: a few KB)
# and a 2 KB chunk buffer. 64-bit objects; a board's are about two thirds of it.
HEAP = "80K"
RESIDENT = ["ota", "ota.agent", "ota.state"]  # and ota.app once an app bundle came (its target)


def release(version, **extra):
    files = {"app.py": ("VERSION = %r\n" % version).encode() * 40, ".fwversion": version.encode()}
    return Release.from_bytes(pack(dict(files, **extra)))


@pytest.fixture
def keys(tmp_path):
    return ReleaseKeys.create(str(tmp_path / "release"))


class Board:
    """One board's flash (a directory) and the messages for it: run(steps) runs them in one
    boot of trust_program.py -> what each step left, one dict a step."""

    def __init__(self, board_lib, where, key_set, running="1.0.0"):
        self.lib, self.dir, self.running = board_lib, where, running
        self.n = 0
        os.makedirs(os.path.join(where, "ota"))
        if key_set is not None:
            with open(os.path.join(where, "ota", "keys.json"), "w") as f:
                json.dump(key_set, f)  # as `fleetwire deploy --release-keys` writes it

    def file(self, data):
        self.n += 1
        path = os.path.join(self.dir, "msg-%d" % self.n)
        with open(path, "wb") as f:
            f.write(data)
        return path

    def offer(self, payload, image=None):
        """An offer step: `payload` as published; `image`, the bytes served for it."""
        return ["offer", self.file(payload), self.file(image) if image is not None else None]

    def keys(self, update):
        return ["keys", self.file(update)]

    def run(self, *steps):
        path = self.file(json.dumps(list(steps)).encode())
        env = dict(os.environ, MICROPYPATH=self.lib + os.pathsep + ".frozen")
        r = subprocess.run(
            [
                micropython.binary(),
                "-X",
                "heapsize=" + HEAP,
                os.path.join(HERE, "trust_program.py"),
                path,
                self.running,
            ],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
            cwd=self.dir,
        )
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        out = [json.loads(x[5:]) for x in r.stdout.splitlines() if x.startswith("STEP ")]
        assert len(out) == len(steps), r.stdout[-3000:]
        for s in out:  # the check is dropped after each message: only the resident updater stays
            assert [m for m in s["loaded"] if m != "ota.app"] == RESIDENT, s
        self.log = r.stdout
        return out


@pytest.fixture
def board(board_lib, tmp_path, keys):
    return Board(board_lib, str(tmp_path / "board"), keys.key_set())


def offered(signer, rel, **extra):
    return signer.sign(rel.manifest(**extra))


def tampered(payload, **change):
    """A signed offer whose manifest was changed after it was signed (the signature kept)."""
    env = json.loads(payload)
    m = json.loads(env["manifest"])
    m.update(change)
    env["manifest"] = json.dumps(m, separators=(",", ":"))
    return json.dumps(env).encode()


def nothing_switched(s, running="1.0.0"):
    assert not s["switched"] and s["running"] == running, s


# ---- what a board takes


def test_a_release_signed_by_a_key_the_board_holds_is_downloaded_checked_and_switched(board, keys):
    rel = release("2.0.0")
    s, b = board.run(board.offer(offered(keys.signer(), rel), rel.data), ["boot"])
    assert s["switched"] and s["state"] == "applied" and s["version"] == "2.0.0", s
    assert s["asked"] > 0 and s["running"] == "2.0.0"
    assert (b["state"], b["running"]) == ("confirmed", "2.0.0"), b


@pytest.mark.parametrize(
    "change",
    [
        {"sha256": "0" * 64},  # another image under the signature
        {"size": 100},  # another length
        {"version": "9.9.9"},  # another version
        {"board": "esp32s3"},  # another target
    ],
    ids=["hash", "length", "version", "target"],
)
def test_a_manifest_changed_after_it_was_signed_is_refused_before_anything_is_downloaded(board, keys, change):
    rel = release("2.0.0")
    (s,) = board.run(board.offer(tampered(offered(keys.signer(), rel), **change), rel.data))
    assert (s["state"], s["code"]) == ("refused", "signature"), s
    assert "the signature by key %s does not match its manifest" % keys.signing_id in s["reason"]
    assert s["asked"] == 0  # not a byte asked for
    nothing_switched(s)


def test_a_tampered_image_under_a_good_manifest_fails_its_hash_and_nothing_switches(board, keys):
    rel = release("2.0.0")
    bad = bytearray(rel.data)
    bad[len(bad) // 2] ^= 1
    (s,) = board.run(board.offer(offered(keys.signer(), rel), bytes(bad)))
    assert (s["state"], s["code"]) == ("failed", "sha256") and s["asked"] > 0, s
    assert "nothing switched" in s["reason"]
    nothing_switched(s)


def test_a_release_signed_by_a_key_the_board_does_not_hold_is_refused(board, keys):
    rel = release("2.0.0")
    other = Signer(new_key(2048))
    (s,) = board.run(board.offer(offered(other, rel), rel.data))
    assert (s["state"], s["code"], s["version"]) == ("refused", "key", "2.0.0"), s
    assert (
        "release 2.0.0 is signed by key %s, which this board does not trust (it trusts %s)"
        % (
            other.id,
            keys.signing_id,
        )
        in s["reason"]
    )
    assert s["asked"] == 0
    nothing_switched(s)


def test_an_unsigned_release_is_refused(board, keys):
    rel = release("2.0.0")
    (s,) = board.run(board.offer(rel.manifest_json(), rel.data))  # the manifest as offered before
    assert (s["state"], s["code"]) == ("refused", "unsigned") and s["asked"] == 0, s
    assert "release 2.0.0 is not signed" in s["reason"]
    nothing_switched(s)


def test_a_board_without_keys_refuses_releases_and_takes_the_first_key_update(board_lib, tmp_path, keys):
    # a board that ran a fleetwire from before signed releases: it took whatever the broker
    # offered, so it takes the first key set as it comes (signed by a key of that set), then
    # holds to it
    b = Board(board_lib, str(tmp_path / "old"), None)
    rel = release("2.0.0")
    s, k, again = b.run(b.offer(offered(keys.signer(), rel), rel.data), b.keys(keys.update()), ["boot"])
    assert (s["state"], s["code"]) == ("refused", "nokeys") and s["asked"] == 0, s
    assert "this board holds no release-signing key" in s["reason"]
    # the key update brings the key: the offer it refused is taken now
    assert k["seq"] == 1 and k["switched"] and k["running"] == "2.0.0", k
    assert again["state"] == "confirmed"


# ---- no downgrade by replay


def test_an_older_release_replayed_is_refused_and_a_signed_rollback_naming_the_running_one_is_taken(
    board, keys
):
    sign = keys.signer()
    old, new = release("1.5.0"), release("2.0.0")
    first = offered(sign, old)  # what the board took once (an attacker kept a copy)
    steps = board.run(
        board.offer(first, old.data),
        ["boot"],
        board.offer(offered(sign, new), new.data),
        ["boot"],
        board.offer(first, old.data),  # replayed
        board.offer(offered(sign, old, rollback="1.9.0"), old.data),  # a rollback, of another release
        board.offer(offered(sign, old, rollback="2.0.0"), old.data),  # the operator's rollback
    )
    assert [s["running"] for s in steps[:4]] == ["1.5.0", "1.5.0", "2.0.0", "2.0.0"], steps
    for s in steps[4:6]:
        assert (s["state"], s["code"], s["asked"]) == ("refused", "older", 0), s
        assert (
            "release 1.5.0 is older than 2.0.0, which runs here; a downgrade is taken only as a signed "
            in (s["reason"])
        )
        nothing_switched(s, "2.0.0")
    assert steps[6]["switched"] and steps[6]["running"] == "1.5.0", steps[6]


def test_an_order_back_is_taken_only_signed_and_naming_the_release_it_replaces(board, keys):
    sign = keys.signer()
    rel = release("2.0.0")
    back = {"v": 1, "op": "revert", "version": "1.0.0"}
    steps = board.run(
        board.offer(offered(sign, rel), rel.data),
        ["boot"],
        board.offer(json.dumps(back).encode()),  # unsigned
        board.offer(sign.sign(dict(back, rollback="1.9.0"))),  # signed, naming another release
        board.offer(Signer(new_key(2048)).sign(dict(back, rollback="2.0.0"))),  # another key
        board.offer(sign.sign(dict(back, rollback="2.0.0"))),
    )
    assert [s["code"] for s in steps[2:5]] == ["unsigned", "older", "key"], steps[2:5]
    for s in steps[2:5]:
        nothing_switched(s, "2.0.0")
    s = steps[5]
    assert s["switched"] and s["running"] == "1.0.0" and s["code"] == "ordered", s


@pytest.mark.parametrize(
    "older, newer",
    [
        ("1.9.2", "1.10.0"),
        ("2.0.0-rc1", "2.0.0"),
        ("2.0.0-rc1", "2.0.0-rc2"),
        ("2.0.0-rc9", "2.0.0-rc10"),  # the tag's number as a number, not as text
        ("2.0.0-beta.2", "2.0.0-beta.11"),
        ("2.0.0-alpha9", "2.0.0-beta1"),
        ("dev", "0.0.1"),
        ("1.4", "1.4.1"),
    ],
)
def test_versions_are_ordered_by_their_numbers_and_a_pre_release_comes_before_its_release(
    board_lib, tmp_path, keys, older, newer
):
    b = Board(board_lib, str(tmp_path / "b"), keys.key_set(), running=newer)
    (s,) = b.run(b.offer(offered(keys.signer(), release(older))))
    assert s["code"] == "older", s


# ---- key rotation without a visit


def test_a_rotation_adds_a_key_both_are_taken_while_it_lasts_and_the_retired_one_is_refused_after(
    board, keys
):
    k1 = keys.signer()
    keys.rotate()
    k2, add = keys.signer(), keys.update()  # the update is signed by the old key: boards hold it
    assert (k2.id != k1.id, json.loads(add)["key"]) == (True, k1.id)
    r1, r2, r3 = release("2.0.0"), release("2.1.0"), release("2.2.0")
    steps = board.run(
        board.keys(add),
        board.offer(offered(k1, r1), r1.data),  # during the rotation: the old key's release
        ["boot"],
        board.offer(offered(k2, r2), r2.data),  # and the new key's
        ["boot"],
    )
    assert steps[0]["seq"] == 2 and steps[0]["code"] is None, steps[0]
    assert [s["running"] for s in steps[1:]] == ["2.0.0", "2.0.0", "2.1.0", "2.1.0"], steps
    keys.retire()
    steps = board.run(
        board.keys(keys.update()),
        board.offer(offered(k1, r3), r3.data),  # the retired key signs no more
        board.keys(add),  # the update that held it, replayed
        board.offer(offered(k2, r3), r3.data),
    )
    assert steps[0]["seq"] == 3, steps[0]
    assert (steps[1]["code"], steps[1]["asked"]) == ("key", 0), steps[1]
    assert "(it trusts %s)" % k2.id in steps[1]["reason"]
    assert (steps[2]["code"], steps[2]["seq"]) == ("replay", 3), steps[2]
    assert "key update 2 is older than this board's key set 3 (a replay)" in steps[2]["reason"]
    assert steps[3]["switched"] and steps[3]["running"] == "2.2.0", steps[3]


def test_a_board_that_missed_the_new_key_takes_its_release_once_the_key_update_comes(board, keys):
    # the retained offer and the retained key update come in either order after a connect
    keys.rotate()
    rel = release("2.0.0")
    s, k = board.run(board.offer(offered(keys.signer(), rel), rel.data), board.keys(keys.update()))
    assert (s["code"], s["asked"]) == ("key", 0), s
    assert k["seq"] == 2 and k["switched"] and k["running"] == "2.0.0", k


def test_a_board_that_missed_a_rotation_takes_the_retirement_signed_by_the_key_it_holds(board, keys):
    k1 = keys.signer()
    keys.rotate()
    keys.retire()
    (s,) = board.run(board.keys(keys.update()))
    assert s["seq"] == 3 and s["code"] is None, s
    assert json.loads(keys.update())["key"] == k1.id


def test_a_key_update_signed_by_another_key_or_unsigned_is_refused_and_the_board_keeps_its_keys(board, keys):
    forger = Signer(new_key(2048))
    mine = {"v": 1, "op": "keys", "seq": 7, "keys": _one(forger)}
    evil = forger.sign(mine)
    steps = board.run(board.keys(evil), board.keys(json.dumps(mine).encode()))
    assert [(s["code"], s["seq"]) for s in steps] == [("key", 1), ("unsigned", 1)], steps
    assert (
        "key update 7 is signed by key %s, which this board does not trust" % forger.id in steps[0]["reason"]
    )


def _one(signer):
    from fleetwire.host.identity.signing import public_b64

    return {signer.id: public_b64(signer.key.public_key())}

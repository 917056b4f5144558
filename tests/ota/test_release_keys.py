"""The operator's release-signing keys (fleetwire.host.identity.signing, `fleetwire release`): what
a key directory holds, how a rotation numbers and signs the key set, and the mistakes refused
with a reason. What a board makes of it is test_signed_releases.py's."""

import json
import os
import subprocess
import sys

import pytest

from fleetwire.host.identity.signing import ReleaseKeys, SigningError, opened


def cli(*args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "fleetwire.tools.cli"] + [str(a) for a in args],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, **(env or {})),
    )


def test_a_key_directory_holds_the_private_key_alone_and_the_key_set_the_boards_get(tmp_path):
    k = ReleaseKeys.create(str(tmp_path / "rk"))
    files = sorted(os.listdir(k.dir))
    assert files == sorted([k.signing_id + ".key", "keys.json", "update.json"])
    assert oct(os.stat(os.path.join(k.dir, k.signing_id + ".key")).st_mode & 0o777) == "0o600"
    board = json.loads(k.board_file())
    assert board == {"seq": 1, "keys": k.key_set()["keys"]} and list(board["keys"]) == [k.signing_id]
    for name in ("keys.json", "update.json"):  # the public files hold no private key
        assert b"PRIVATE" not in (tmp_path / "rk" / name).read_bytes()
    # the first key update carries the set, signed by its own key (for a board that holds none)
    assert opened(k.update(), k.key_set()) == {"v": 1, "op": "keys", "seq": 1, "keys": board["keys"]}


def test_a_rotation_numbers_each_key_set_and_signs_it_with_a_key_the_boards_hold(tmp_path):
    k = ReleaseKeys.create(str(tmp_path / "rk"))
    first, set1 = k.signing_id, k.key_set()
    second = k.rotate()
    assert k.signing_id == second and k.ids == sorted([first, second]) and k.seq == 2
    assert opened(k.update(), set1)["seq"] == 2  # boards holding set 1 check it
    set2 = k.key_set()
    assert k.retire() == [first]
    assert k.ids == [second] and k.seq == 3
    # signed by the retiring key: a board that missed set 2 still checks it
    assert opened(k.update(), set1)["keys"] == k.key_set()["keys"]
    assert opened(k.update(), set2)["seq"] == 3
    assert k.state["retired"] == [first]


@pytest.mark.parametrize(
    "mistake, why",
    [
        ("init twice", "already holds release-signing keys"),
        ("retire the only key", "no key to retire: the set holds only the signing key"),
        ("retire the signing key", "signs releases now: `fleetwire release rotate` first"),
        ("retire a stranger", "is not in the set"),
        ("no directory", "no release-signing keys in"),
        ("a key size boards do not take", "is 2048 or 3072 or 4096 bits, not 1024"),
    ],
)
def test_mistakes_with_the_keys_are_refused_with_a_reason_and_change_nothing(tmp_path, mistake, why):
    d = str(tmp_path / "rk")
    k = ReleaseKeys.create(d)
    before = {n: (tmp_path / "rk" / n).read_bytes() for n in os.listdir(d)}
    with pytest.raises(SigningError, match=why.replace("(", r"\(")):
        if mistake == "init twice":
            ReleaseKeys.create(d)
        elif mistake == "retire the only key":
            k.retire()
        elif mistake == "retire the signing key":
            k.retire(k.signing_id)
        elif mistake == "retire a stranger":
            k.retire("0123456789abcdef")
        elif mistake == "no directory":
            ReleaseKeys(str(tmp_path / "nothing"))
        else:
            ReleaseKeys.create(str(tmp_path / "small"), bits=1024)
    assert {n: (tmp_path / "rk" / n).read_bytes() for n in os.listdir(d)} == before


def test_the_release_command_says_what_to_do_next_and_never_prints_a_key(tmp_path):
    d = tmp_path / "rk"
    said = []
    for args in (["init"], ["rotate"], ["list"], ["retire"], ["list"]):
        r = cli("release", *args, "--dir", d)
        assert r.returncode == 0, r.stderr
        said.append(r.stdout)
    assert "next: fleetwire deploy --release-keys %s" % d in said[0]
    assert "next: fleetwire release publish" in said[1] and "then fleetwire release retire" in said[1]
    assert said[4].startswith("key set 3 in %s" % d)
    text = "".join(said)
    for name in os.listdir(d):
        if name.endswith(".key"):
            body = [x for x in (d / name).read_text().splitlines() if not x.startswith("-----")]
            assert not any(x in text for x in body), name
    r = cli("release", "init", "--dir", d)
    assert r.returncode == 2 and "already holds release-signing keys" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_commands_that_sign_or_trust_need_the_keys_and_say_where_they_looked(tmp_path):
    home = {"HOME": str(tmp_path), "FLEETWIRE_RELEASE": ""}
    r = cli("sim", "--updates", "--devices", "1", env=home)
    assert (
        r.returncode == 2
        and "--updates: no release-signing keys in %s" % (tmp_path / ".fleetwire" / "release") in r.stderr
    ), r.stderr


def test_a_rollout_offered_unsigned_asks_for_no_keys_and_goes_on_to_the_broker(tmp_path):
    # for boards running a fleetwire from before signed releases
    from fleetwire.host.rollout.release import Release, pack

    rel = tmp_path / "r.fwb"
    rel.write_bytes(Release.from_bytes(pack({"app.py": b"x = 1\n", ".fwversion": b"1.5.0"})).data)
    home = {"HOME": str(tmp_path), "FLEETWIRE_RELEASE": ""}
    args = ["rollout", "--broker", "127.0.0.1:1", "--release", rel, "--device", "a", "--no-gate"]
    r = cli(*args, env=home)
    assert r.returncode == 2 and "no release-signing keys in" in r.stderr, r.stderr
    r = cli(*args, "--unsigned", env=home)
    assert r.returncode == 1 and "broker 127.0.0.1:1" in r.stderr, r.stderr  # past the keys

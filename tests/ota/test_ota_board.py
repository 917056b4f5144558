"""Over-the-air updates on a board (fleetwire.ota): a virtual board unless --board, the
board's own main.py and fleetwire.runner with "ota": true, a mosquitto that enforces fleet
identity, and the update service (fleetwire.host.rollout.service) logged in as the operator."""

import json
import os

import pytest


def test_an_app_update_reaches_the_board_over_the_broker_and_the_board_runs_it(ota_board, releases):
    b = ota_board
    b.deploy()
    b.wait_running("1.0.0")
    rel = releases("2.0.0")
    b.service.offer([b.id], rel)
    b.console.wait_for("app: release 2.0.0 running", 90)
    ota = b.wait_for("confirmed", "2.0.0")
    b.wait_running("2.0.0")
    assert ota["code"] is None and ota["reason"] is None
    # the board downloaded it once, in chunks no larger than the manifest's
    assert b.service.devices[b.id].bytes_sent == rel.size


def _board_file(b, path):
    p = os.path.join(b.board.vboard.fs, path)
    return open(p).read() if os.path.exists(p) else None


@pytest.mark.parametrize("fault", ["a corrupted chunk", "a truncated image", "a wrong size", "another board"])
def test_a_bad_release_is_refused_with_its_reason_in_vitals_and_nothing_switched(ota_board, releases, fault):
    b = ota_board
    b.deploy()
    b.wait_running("1.0.0")
    rel = releases("2.0.0")
    manifest = None
    if fault == "a corrupted chunk":
        bad = bytearray(rel.data)
        bad[rel.size // 2] ^= 0x10  # one bit flipped on its way
        b.service.add(rel, data=bytes(bad))
    elif fault == "a truncated image":
        b.service.add(rel, data=rel.data[: rel.size - 3000])
    elif fault == "a wrong size":
        manifest = rel.manifest(size=rel.size - 100)
    else:
        manifest = rel.manifest(board="esp32s3")
    b.service.offer([b.id], rel, manifest=manifest)
    state, code, words = {
        "a corrupted chunk": ("failed", "sha256", "SHA-256 of the %d bytes received" % rel.size),
        "a truncated image": ("failed", "truncated", "ended release 2.0.0 at %d bytes" % (rel.size - 3000)),
        "a wrong size": ("failed", "past_end", "past the %d bytes of its manifest" % (rel.size - 100)),
        "another board": ("refused", "board", "is for board kind 'esp32s3'; this board is 'esp32'"),
    }[fault]
    ota = b.wait_for(state, "2.0.0")
    assert ota["code"] == code and words in ota["reason"], ota
    assert "nothing switched" in ota["reason"] or code == "board"
    # still the deployed release, nothing switched and nothing left of the download
    assert b.device.fw_version == "1.0.0"
    # the board's own word for a switch (its failure line says "nothing switched", and reaches the
    # console before or after this check, as the machine's load has it)
    assert "release 2.0.0 switched" not in b.console.text
    if b.board.virtual:
        assert _board_file(b, "ota/boot.json") is None
        assert not os.path.exists(os.path.join(b.board.vboard.fs, "ota", "dl.bin"))


CRASHING_APP = """
def setup(client):
    raise RuntimeError("release 2.0.1 cannot start")
"""

# This release broke the board's Wi-Fi: it never connects (the runner imports app.py first)
OFFLINE_APP = """
from fleetwire import board
board.wlan_connect = lambda *a, **k: False
"""


@pytest.mark.parametrize("how", ["crashes at boot", "never connects"])
def test_a_new_app_that_fails_its_trial_is_rolled_back_and_the_board_says_why(ota_board, releases, how):
    b = ota_board
    b.deploy(ota_confirm_s=6, wifi_timeout_ms=500)
    b.wait_running("1.0.0")
    version, app = ("2.0.1", CRASHING_APP) if how == "crashes at boot" else ("2.0.2", OFFLINE_APP)
    rel = releases(version, app=app)
    b.service.offer([b.id], rel)
    b.console.wait_for("ota: app %s on trial" % version, 60)
    ota = b.wait_for("rolled_back", version, 90)
    why = (
        "the new app failed: RuntimeError: release 2.0.1 cannot start"
        if how == "crashes at boot"
        else "release 2.0.2: not connected within 6 s of boot"
    )
    assert why in ota["reason"], ota
    b.wait_running("1.0.0")
    b.console.wait_for("resetting; the previous release comes back")
    if b.board.virtual:  # back on the deployed app: no bundle runs
        assert '"app": null' in _board_file(b, "ota/boot.json")
    # the offer is still there (retained): the board does not take the release again
    sent = b.service.devices[b.id].bytes_sent
    b.board.power_cycle()
    b.console.wait_for("main: boot 4 ", 30)
    b.wait_for("rolled_back", version)
    assert b.ota()["code"] == "rolled" and why in b.ota()["reason"]
    assert b.service.devices[b.id].bytes_sent == sent == rel.size


def test_a_power_cut_at_every_chunk_boundary_resumes_there_and_the_board_always_runs_one_release(
    ota_board, releases
):
    b = ota_board
    if not b.board.virtual:
        pytest.skip("cutting the power needs a virtual board")
    # big chunks, one per request: each request is a chunk boundary, where the power goes (and
    # records in files: the ring store on the mqtt partition takes packets up to a flash block)
    b.deploy(max_packet=8400, ota_window=1, partition="none")
    b.wait_running("1.0.0")
    rel = releases("2.0.0", chunk=8192)
    cut, asked = set(), []

    def at_request(device, offset, count):
        asked.append(offset)
        if offset and offset not in cut:
            cut.add(offset)
            b.board.power_cycle()  # everything up to `offset` is on its flash; the power goes
            return False
        return True

    b.service.before_serve = at_request
    b.service.offer([b.id], rel)
    b.wait_for("confirmed", "2.0.0", 180)
    boundaries = list(range(8192, rel.size, 8192))
    assert sorted(cut) == boundaries
    # after each cut the board asked again for the very chunk it was cut before: never from zero
    for o in boundaries:
        i = asked.index(o)
        assert asked[i + 1] == o, asked
    assert asked.count(0) == 1
    assert b.service.devices[b.id].bytes_sent == rel.size  # no byte downloaded twice
    # every boot until the switch ran the deployed release (the resumes were its), the one after
    # it the new one, once
    text = b.console.wait_for("ota: app 2.0.0 on trial")
    assert text.count("ota: release 2.0.0 (app, %d bytes) resumes at" % rel.size) == len(boundaries)
    assert text.count("ota: app 2.0.0 on trial") == 1
    b.wait_running("2.0.0")


def test_a_power_cut_while_the_update_is_checked_unpacked_and_switched_keeps_one_whole_release(
    ota_board, releases
):
    # cut_program.py cuts at every flash operation of these steps; here the real board is cut
    # at moments after its last chunk (the check, the unpacking and the switch take ~0.1-0.5 s)
    import threading

    b = ota_board
    if not b.board.virtual:
        pytest.skip("cutting the power needs a virtual board")
    b.deploy()
    b.wait_running("1.0.0")
    current, outcomes = "1.0.0", []
    for version, delay in (("2.0.0", 0.02), ("2.1.0", 0.15), ("2.2.0", 0.4)):
        rel = releases(version)
        once = []

        def at_request(device, offset, count, rel=rel, delay=delay, once=once):
            if not once and offset + count * 1024 >= rel.size:  # the last window: served, then the cut
                once.append(offset)
                threading.Timer(delay, b.board.power_cycle).start()
            return True

        b.service.before_serve = at_request
        b.service.offer([b.id], rel)
        # a cut before the switch: the update resumes and is confirmed; after it, during the new
        # release's trial: that boot ended before it confirmed, so the board goes back
        assert b.service.wait(
            lambda devs: (
                devs[b.id].ota.get("version") == version  # noqa: B023 (waited for in this iteration)
                and devs[b.id].ota.get("state") in ("confirmed", "rolled_back")
            ),
            90,
        )
        if b.ota()["state"] == "confirmed":
            outcomes.append("confirmed")
            current = version
        else:
            outcomes.append("rolled back")
            assert "reset before it confirmed" in b.ota()["reason"]
        b.wait_running(current)
        assert once
    text = b.console.text
    assert "Traceback" not in text and "ImportError" not in text  # no boot ran a broken or mixed app
    assert "confirmed" in outcomes


def firmware(version, **files):
    from fleetwire.host.rig.espimage import app_image
    from fleetwire.host.rollout.release import Release

    files = dict({"fwinfo.py": "VERSION = %r\n" % version}, **files)
    return Release.from_bytes(app_image(version, files=files))


def _otadata(b):
    from fleetwire.host.rig import bootloader

    vb = b.board.vboard
    part = next(p for p in vb.partition_table() if p.label == "otadata")
    return [(e.seq, bootloader.STATE_NAMES[e.state]) for e in bootloader.read_otadata(vb.flash, part)]


def test_a_firmware_image_goes_into_the_next_ota_slot_boots_and_is_confirmed(ota_board):
    b = ota_board
    if not b.board.virtual:
        pytest.skip("checks the virtual board's otadata")
    b.deploy()
    b.wait_running("1.0.0")
    rel = firmware("3.0.0")
    assert rel.kind == "firmware"
    b.service.offer([b.id], rel)
    b.console.wait_for("ota: firmware 3.0.0 on trial", 60)
    b.wait_for("confirmed", "3.0.0")
    b.wait_running("3.0.0")
    vb = b.board.vboard
    assert (vb.boot.partition.label, vb.boot.version) == ("ota_1", "3.0.0")
    assert _otadata(b)[1] == (2, "valid")  # mark_app_valid_cancel_rollback(): no rollback now


def test_a_firmware_image_that_crashes_at_boot_is_rolled_back_by_the_bootloader(ota_board):
    b = ota_board
    if not b.board.virtual:
        pytest.skip("checks the virtual board's otadata")
    b.deploy(ota_confirm_s=10)
    b.wait_running("1.0.0")
    # its frozen app.py (the deployed board has none of its own) stops the program at once
    rel = firmware("3.0.1", **{"app.py": "raise RuntimeError('firmware 3.0.1 cannot start')\n"})
    b.service.offer([b.id], rel)
    b.console.wait_for("ota: firmware 3.0.1 on trial", 60)
    ota = b.wait_for("rolled_back", "3.0.1", 90)
    assert "RuntimeError: firmware 3.0.1 cannot start" in ota["reason"]
    b.wait_running("1.0.0")
    vb = b.board.vboard
    assert vb.boot.partition.label == "ota_0" and _otadata(b)[1] == (2, "aborted")


def test_a_firmware_image_that_does_not_verify_is_refused_by_set_boot_and_nothing_switches(ota_board):
    b = ota_board
    if not b.board.virtual:
        pytest.skip("checks the virtual board's otadata")
    b.deploy()
    b.wait_running("1.0.0")
    good = firmware("3.0.2")
    bad = bytearray(good.data)
    bad[-40] ^= 0xFF  # inside its appended SHA-256: esptool's image, broken
    from fleetwire.host.rollout.release import Release

    rel = Release("firmware", "3.0.2", bytes(bad))  # its manifest's SHA-256 is of the broken bytes
    b.service.offer([b.id], rel)
    ota = b.wait_for("failed", "3.0.2")
    assert ota["code"] == "image" and "ESP_ERR_OTA_VALIDATE_FAILED" in ota["reason"], ota
    assert b.board.vboard.boot.partition.label == "ota_0" and _otadata(b)[1][1] == "undefined"


def test_the_operator_orders_a_board_back_to_the_release_before(ota_board, releases):
    b = ota_board
    b.deploy()
    b.wait_running("1.0.0")
    b.service.offer([b.id], releases("2.0.0"))
    b.wait_for("confirmed", "2.0.0")
    sent = b.service.devices[b.id].bytes_sent
    b.service.revert([b.id], "1.0.0", "2.0.0")
    ota = b.wait_for("rolled_back", "2.0.0")
    assert ota["code"] == "ordered" and "the operator ordered a rollback to 1.0.0" in ota["reason"]
    b.wait_running("1.0.0")
    assert b.service.devices[b.id].bytes_sent == sent  # nothing downloaded: the old app was kept
    # a revert to a release this board never ran is refused
    b.service.revert([b.id], "0.9.0", "1.0.0")
    ota = b.wait_for("refused", "0.9.0")
    assert ota["code"] == "revert" and "cannot go back to 0.9.0" in ota["reason"]
    b.wait_running("1.0.0")


def _said(b, code, version, timeout=60):
    """Until the board's vitals say ota.code == code for `version` -> the ota member."""
    ok = b.service.wait(
        lambda devs: (
            devs.get(b.id) is not None
            and devs[b.id].ota.get("code") == code
            and devs[b.id].ota.get("version") == version
        ),
        timeout,
    )
    assert ok, "no vitals record with code %s for %s; last: %r\nconsole:\n%s" % (
        code,
        version,
        b.ota(),
        b.console.text[-3000:],
    )
    return b.ota()


def test_what_the_operator_did_not_sign_is_refused_by_the_board_and_nothing_switches(
    ota_board, releases, release_keys
):
    # the update service is logged in as the operator: it may publish any offer to the board; only
    # the release-signing key makes one the board takes

    from fleetwire.host.identity.signing import Signer, new_key

    b = ota_board
    b.deploy()
    b.wait_running("1.0.0")
    rel, evil = releases("2.0.0"), releases("2.0.0", app="print('not the operator's')\n")
    b.service.add(evil)
    good = release_keys.signer().sign(rel.manifest())
    env = json.loads(good)
    env["manifest"] = (
        env["manifest"]
        .replace(rel.sha256, evil.sha256)
        .replace('"size":%d' % rel.size, '"size":%d' % evil.size)
    )
    forged = {
        "unsigned": rel.manifest_json(),  # as offers went before releases were signed
        "key": Signer(new_key(2048)).sign(evil.manifest()),  # signed by a key of the forger's own
        "signature": json.dumps(env).encode(),  # the operator's signature over another image
    }
    for code, payload in forged.items():
        b.service.offer([b.id], rel, payload=payload)
        ota = _said(b, code, "2.0.0")
        assert ota["state"] == "refused", ota
    assert b.service.devices[b.id].bytes_sent == 0  # not a byte downloaded
    assert "switched" not in b.console.text and b.device.fw_version == "1.0.0"
    # what the operator signed goes through
    b.service.offer([b.id], rel)
    b.wait_for("confirmed", "2.0.0", 90)
    assert b.service.devices[b.id].bytes_sent == rel.size
    # and an older one the operator signed once, replayed, is refused
    b.service.offer([b.id], releases("1.5.0"))
    ota = _said(b, "older", "1.5.0")
    assert "release 1.5.0 is older than 2.0.0, which runs here" in ota["reason"]
    b.wait_running("2.0.0")


def test_a_key_rotation_reaches_the_board_over_the_broker_and_releases_of_the_new_key_go_through(
    ota_board, releases, tmp_path
):
    # the key update carries both keys (longer than the client's max_packet: it comes in pieces)
    from fleetwire.host.identity.signing import ReleaseKeys

    b = ota_board
    b.keys = keys = ReleaseKeys.create(str(tmp_path / "release"))
    b.deploy()
    b.wait_running("1.0.0")
    keys.rotate()
    assert len(keys.update()) > 1024
    b.service.signer = keys.signer()  # the new key signs
    b.service.offer([b.id], releases("2.0.0"))  # before the board has the key: refused, kept
    _said(b, "key", "2.0.0")
    b.service.publish_keys([b.id], keys.update())
    b.console.wait_for("ota: release-signing keys updated to set 2", 60)
    b.wait_for("confirmed", "2.0.0", 90)  # the offer it kept, taken once the key came
    if b.board.virtual:
        assert json.load(open(os.path.join(b.board.vboard.fs, "ota", "keys.json")))["seq"] == 2

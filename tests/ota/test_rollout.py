"""`fleetwire rollout` (fleetwire.host.rollout.staged): stages, the gate's verdict, and rollouts to a
simulated fleet whose devices take updates with fleetwire.ota itself, through mosquitto.
The gate with the Spark report end to end is tests/fleet/test_demo.py."""

import asyncio
import subprocess
import sys
import threading

import pytest

from fleetwire.host.rollout import staged as ro
from fleetwire.host.rollout.release import Release, pack
from fleetwire.host.fleet.sim import Simulator


def release(version, size=3000):
    return Release.from_bytes(pack({"app.py": b"#" * size, ".fwversion": version.encode()}))


IDS = ["dev-%03d" % i for i in range(200)]


def test_stages_are_cumulative_shares_in_an_order_that_is_stable_for_a_release_and_new_for_the_next():
    rel = release("1.5.0")
    s = ro.plan("5%,25%,100%", IDS, rel)
    assert [(x.name, len(x.devices), len(x.new)) for x in s] == [
        ("5%", 10, 10),
        ("25%", 50, 40),
        ("100%", 200, 150),
    ]
    assert s[1].devices[:10] == s[0].devices and sorted(s[2].devices) == sorted(IDS)
    assert ro.plan("5%,25%,100%", list(reversed(IDS)), rel)[0].devices == s[0].devices  # stable
    assert ro.plan("5%", IDS, release("1.5.1"))[0].devices != s[0].devices  # new canaries
    assert [len(x.devices) for x in ro.plan("1%,100%", IDS[:3], rel)] == [1, 3]  # at least one


def test_stages_can_be_named_groups_of_the_devices_file():
    rel = release("1.5.0")
    groups = {"dev-000": "canary", "dev-001": "canary", "dev-002": "eu", "dev-003": "eu"}
    s = ro.plan("canary,eu,*", IDS[:6], rel, groups)
    assert [sorted(x.new) for x in s] == [
        ["dev-000", "dev-001"],
        ["dev-002", "dev-003"],
        ["dev-004", "dev-005"],
    ]


@pytest.mark.parametrize(
    "spec,devices,why",
    [
        ("", IDS, "no stages"),
        ("5%,x%", IDS, "a number of per cent"),
        ("0%", IDS, "more than 0"),
        ("5%", [], "no devices"),
        ("50%,50%", IDS, "adds no device"),
        ("canary", IDS, "no device is in group"),
    ],
)
def test_stages_that_make_no_sense_are_refused_with_the_reason(spec, devices, why):
    with pytest.raises(ro.RolloutError, match=why):
        ro.plan(spec, devices, release("1.5.0"))


def cohort(version, hours, cfh, cov, loss, prev=None):
    return {
        "fw_version": version,
        "device_hours": hours,
        "crash_free_hours_pct": cfh,
        "mean_coverage": cov,
        "mean_loss_rate": loss,
        "prev_fw_version": prev,
    }


BASE = cohort("1.4.2", 400, 98.5, 0.99, 0.001)


def test_the_gate_halts_a_release_that_crashes_more_and_says_so_with_the_numbers():
    v = ro.judge([BASE, cohort("1.5.0", 30, 80.0, 0.985, 0.002, "1.4.2")], "1.5.0", "1.4.2", ro.Thresholds())
    assert not v.ok
    assert v.reason == (
        "crash-free hours 80.0 % on 1.5.0 against 98.5 % on 1.4.2 (-18.5 points, the limit is -2.0 points)"
    )
    assert v.lines[0].endswith("HALT") and v.lines[1].endswith("ok") and v.lines[2].endswith("ok")
    assert "(30 device-hours)" in v.lines[0] and "(400)" in v.lines[0]


def sig(version, signature, devices, crashes=None):
    return {"fw_version": version, "signature": signature, "devices": devices, "crashes": crashes or devices}


CRASHES = {
    "crash_releases": [
        {"fw_version": "1.4.2", "crash_free_devices_pct": 99.0},
        {"fw_version": "1.5.0", "crash_free_devices_pct": 91.0},
    ],
    "crash_signatures": [
        sig("1.4.2", "KeyError in read (sensor.py)", 4),
        sig("1.5.0", "KeyError in read (sensor.py)", 12),  # more devices, but 1.4.2 had it
        sig("1.5.0", "ZeroDivisionError in step (app.py)", 9),
        sig("1.5.0", "OSError in send (net.py)", 2),
    ],
}


def test_a_halt_names_the_top_new_crash_of_the_release():
    v = ro.judge(
        [BASE, cohort("1.5.0", 30, 80.0, 0.985, 0.002, "1.4.2")], "1.5.0", "1.4.2", ro.Thresholds(), CRASHES
    )
    assert not v.ok
    assert v.reason.endswith("; top new crash ZeroDivisionError in step (app.py), 9 devices")
    assert v.numbers["top_crash"] == "top new crash ZeroDivisionError in step (app.py), 9 devices"
    # no new one: the top one, said so
    old = dict(CRASHES, crash_signatures=CRASHES["crash_signatures"][:2])
    v = ro.judge([BASE, cohort("1.5.0", 30, 80.0, 0.985, 0.002)], "1.5.0", "1.4.2", ro.Thresholds(), old)
    assert v.reason.endswith("; top crash KeyError in read (sensor.py), 12 devices")
    # a release let through names none
    v = ro.judge([BASE, cohort("1.5.0", 30, 98.0, 0.99, 0.001)], "1.5.0", "1.4.2", ro.Thresholds(), CRASHES)
    assert v.ok and "top_crash" not in v.numbers


def test_crash_free_devices_can_gate_a_stage():
    ok = cohort("1.5.0", 30, 98.5, 0.99, 0.001)  # crash-free hours alone would let it through
    assert ro.judge([BASE, ok], "1.5.0", "1.4.2", ro.Thresholds(), CRASHES).ok  # not checked by default
    v = ro.judge([BASE, ok], "1.5.0", "1.4.2", ro.Thresholds(max_crash_free_devices_drop=5.0), CRASHES)
    assert not v.ok
    assert v.reason == (
        "crash-free devices 91.0 % on 1.5.0 against 99.0 % on 1.4.2 (-8.0 points, the limit is -5.0 points)"
        "; top new crash ZeroDivisionError in step (app.py), 9 devices"
    )


@pytest.mark.parametrize(
    "new,what",
    [
        (cohort("1.5.0", 30, 98.0, 0.90, 0.001), "coverage 0.900 on 1.5.0 against 0.990 on 1.4.2 (-0.090"),
        (cohort("1.5.0", 30, 98.0, 0.99, 0.05), "loss 0.0500 on 1.5.0 against 0.0010 on 1.4.2 (+0.0490"),
    ],
)
def test_the_gate_halts_on_coverage_or_loss_too(new, what):
    v = ro.judge([BASE, new], "1.5.0", "1.4.2", ro.Thresholds())
    assert not v.ok and what in v.reason


def test_the_gate_lets_a_release_within_the_thresholds_through_and_judges_only_with_enough_data():
    th = ro.Thresholds(max_crash_free_drop=1.0, min_device_hours=10)
    assert ro.judge([BASE, cohort("1.5.1", 30, 97.6, 0.99, 0.001)], "1.5.1", "1.4.2", th).ok
    assert not ro.judge([BASE, cohort("1.5.1", 30, 97.4, 0.99, 0.001)], "1.5.1", "1.4.2", th).ok
    v = ro.judge([BASE, cohort("1.5.1", 4, 100.0, 0.99, 0.001)], "1.5.1", "1.4.2", th)
    assert not v.ok
    assert v.reason == "not enough to judge: 1.5.1 has 4 device-hours in the report, the gate wants 10"
    v = ro.judge([BASE], "1.5.1", "1.4.2", th)
    assert not v.ok and "1.5.1 is not in the report's release table" in v.reason
    # without a baseline in the table: the release before it in the table's order
    assert (
        ro.judge([BASE, cohort("1.5.1", 30, 99.0, 0.99, 0.001, "1.4.2")], "1.5.1", "9.9", th).numbers[
            "baseline"
        ]
        == "1.4.2"
    )


@pytest.fixture
def sim_fleet(fresh_mosquitto, release_keys):
    """A simulated fleet of 20 devices with updates on, trusting the fleet's release-signing keys,
    running in a thread while the test runs; release 1.6.0 crashes at every boot."""
    b = fresh_mosquitto(max_queued=100000)
    sim = Simulator(
        b.host,
        b.port,
        devices=20,
        period_s=60,
        speed=240,
        duration=3600,
        seed=5,
        rollout=None,
        ota=True,
        wifi_drops_per_hour=0,
        silent_share=0,
        profiles={"1.6.0": {"crash_per_hour": 0.0, "boot_crash": 1.0}},
        release_keys=release_keys.key_set(),
    )
    t = threading.Thread(target=lambda: asyncio.run(sim.run()), daemon=True)
    t.start()
    assert sim.started.wait(30)
    yield b, sim
    sim.stop_after(0)
    t.join(60)


def rollout_cli(b, tmp_path, rel, keys, *args):
    path = tmp_path / ("%s.fwb" % rel.version)
    path.write_bytes(rel.data)
    devices = tmp_path / "devices.txt"
    devices.write_text("".join("sim-%04d\n" % i for i in range(20)))
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "fleetwire.tools.cli",
            "rollout",
            "--broker",
            "127.0.0.1:%d" % b.port,
            "--release",
            str(path),
            "--devices",
            str(devices),
            "--no-gate",
            "--stage-timeout",  # a deadline: a loaded machine took over 60 s to roll a device back
            "180",
            "--release-keys",
            keys.dir,
        ]
        + list(args),
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_a_release_goes_to_the_whole_simulated_fleet_stage_by_stage(sim_fleet, tmp_path, release_keys):
    b, sim = sim_fleet
    r = rollout_cli(b, tmp_path, release("1.5.1"), release_keys, "--stages", "10%,50%,100%")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    out = r.stdout
    assert "stage 1/3 (10%): offered to 2 more devices, 2 in all" in out
    assert "stage 3/3 (100%): offered to 10 more devices, 20 in all" in out
    assert "[" + "#" * 24 + "] 20/20  offered 20 | downloading 0 | confirmed 20 | rolled back 0" in out
    assert "done: 1.5.1 on 20 of 20 devices (0 rolled back, 0 failed)" in out
    assert sim.versions() == {"1.5.1": 20}


def test_a_release_whose_devices_roll_back_halts_the_rollout_before_the_next_stage(
    sim_fleet, tmp_path, release_keys
):
    b, sim = sim_fleet
    r = rollout_cli(b, tmp_path, release("1.6.0"), release_keys, "--stages", "10%,100%")
    assert r.returncode == 3, r.stdout[-3000:] + r.stderr[-2000:]
    assert (
        "HALTED after stage 1 (10%): 2 of 2 devices rolled back or failed (100 %, the limit is 20 %); "
        "the commonest reason (2 devices):"
    ) in r.stdout
    assert "the new app reset before it confirmed" in r.stdout
    assert "stage 2/2" not in r.stdout
    assert sim.versions() == {"1.4.2": 20}  # the two went back; the others were never offered it


@pytest.mark.parametrize(
    "args,why",
    [
        (["--release", "nope.fwb", "--device", "a", "--no-gate"], "cannot read release nope.fwb"),
        (["--release", "REL", "--no-gate"], "which devices?"),
        (["--release", "REL", "--device", "a"], "the gate needs --landing"),
        (
            ["--release", "REL", "--device", "a", "--no-gate", "--cert", "c.pem"],
            "--cert and --key go together",
        ),
        (
            ["--release", "REL", "--device", "a", "--no-gate", "--release-keys", "nowhere"],
            "no release-signing keys in",
        ),
    ],
)
def test_bad_input_is_refused_with_one_line_and_exit_2(args, why, tmp_path):
    rel = tmp_path / "r.fwb"
    rel.write_bytes(release("1.5.0").data)
    args = [str(rel) if a == "REL" else a for a in args]
    r = subprocess.run(
        [sys.executable, "-m", "fleetwire.tools.cli", "rollout", "--broker", "127.0.0.1:1"] + args,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2 and why in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_fleetwire_bundle_builds_a_release_the_rollout_reads(tmp_path):
    app = tmp_path / "app.py"
    app.write_text("def setup(client):\n    pass\n")
    out = tmp_path / "app.fwb"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "fleetwire.tools.cli",
            "bundle",
            "--version",
            "1.7.0",
            "--app",
            str(app),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    rel = Release.from_file(str(out))
    assert (rel.kind, rel.version) == ("app", "1.7.0")
    from fleetwire.host.rollout.release import unpack

    files = unpack(rel.data)
    assert (
        "app.mpy" in files and "lib/fleetwire/ota/agent.mpy" in files and "lib/fleetwire/runner.mpy" in files
    )
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "fleetwire.tools.cli",
            "bundle",
            "--version",
            "1.7.0",
            "--app",
            str(tmp_path / "main.py"),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2 and "main.py stays on the board" in r.stderr

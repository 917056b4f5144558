"""The package works where it is installed, not only from a checkout: its wheel, built from
this tree, holds every file of the five source folders, and installed into a fresh virtual
environment away from the checkout it answers `fleetwire --help` with no extras, names the
extra a command needs, starts a virtual board, deploys a program to it that reports to a
broker, and runs the fleet report.

The rig's and Spark's own packages are not downloaded here: the extras' environment sees
this suite's installed ones (a .pth file), with their commands on PATH after the fresh
environment's own; fleetwire itself comes only from the wheel."""

import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
import zipfile

import pytest

from support import ROOT

FOLDERS = {"device": "fleetwire", "shared": "fleetwire/codec", "host": "fleetwire/host"}
FOLDERS.update({"tools": "fleetwire/tools", "firmware": "fleetwire/firmware"})


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheel")
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(out),
            ROOT,
        ],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    (path,) = glob.glob(str(out / "fleetwire-*.whl"))
    return path


def tracked():
    r = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True)
    return r.stdout.split()


def test_the_wheel_holds_every_file_of_the_source_folders(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    files = [f for f in tracked() if f.split("/")[0] in FOLDERS and os.path.exists(os.path.join(ROOT, f))]
    assert len(files) > 100
    missing = [f for f in files if FOLDERS[f.split("/")[0]] + f[f.index("/") :] not in names]
    assert not missing, "the wheel leaves out %s" % missing
    assert not [n for n in names if "node_modules" in n or "__pycache__" in n]


def venv(path, deps=False):
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    if deps:  # the extras: this suite's installed packages, after the environment's own
        (path / "extras").touch()
        site = glob.glob(str(path / "lib" / "python*" / "site-packages"))[0]
        with open(os.path.join(site, "suite_packages.pth"), "w") as f:
            f.write(sysconfig.get_paths()["purelib"] + "\n")
    return path


def install(wheel, env):
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(env / "bin" / "python"),
            "install",
            "-q",
            "--no-deps",
            wheel,
        ],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stdout + r.stderr


def search_path(env, extras=True):
    # the environment's commands first, then (with the extras) the suite's: the unix port,
    # mpremote, node; a bare environment sees none of the suite's
    suite = os.path.dirname(sys.executable)
    rest = [d for d in os.environ["PATH"].split(os.pathsep) if os.path.realpath(d) != os.path.realpath(suite)]
    return os.pathsep.join([str(env / "bin")] + ([suite] if extras else []) + rest)


def fw(env, *args, cwd, timeout=300, **kw):
    path = search_path(env, os.path.exists(env / "extras"))
    return subprocess.run(
        [str(env / "bin" / "fleetwire")] + list(args),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(os.environ, PATH=path),
        **kw,
    )


def test_a_bare_install_has_help_and_names_the_extra_a_command_needs(wheel, tmp_path):
    env = venv(tmp_path / "bare")
    install(wheel, env)
    r = fw(env, "--help", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "vboard" in r.stdout and "report" in r.stdout
    for extra, args in (
        ("rig", ["ca", "init", "--dir", str(tmp_path / "ca")]),
        ("rig", ["vboard", "--dir", str(tmp_path / "boards")]),
        ("spark", ["gen-telemetry", "--out", str(tmp_path / "zone")]),
        ("spark", ["report", "--input", str(tmp_path / "zone"), "--out", str(tmp_path / "out")]),
    ):
        r = fw(env, *args, cwd=tmp_path, timeout=60)
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 2 and len(lines) == 1, (args, r.stdout, r.stderr)
        assert "pip install 'fleetwire[%s]'" % extra in lines[0], (args, r.stderr)
    r = fw(env, "build", "--out", str(tmp_path / "tree"), cwd=tmp_path)  # the board tree needs nothing
    assert r.returncode == 0, r.stderr
    assert os.path.exists(tmp_path / "tree" / "lib" / "fleetwire" / "client.py")


@pytest.fixture
def installed(wheel, tmp_path):
    env = venv(tmp_path / "env", deps=True)
    install(wheel, env)
    r = subprocess.run(
        [str(env / "bin" / "python"), "-c", "import fleetwire; print(fleetwire.__file__)"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert r.stdout.startswith(str(env)), "fleetwire comes from %s, not the wheel" % r.stdout
    return env


def test_installed_it_starts_a_board_and_deploys_a_program_that_reports_to_the_broker(
    installed, tmp_path, broker_pool, make_observer
):
    b = broker_pool("aedes")
    boards = tmp_path / "boards"
    vb = subprocess.Popen(
        [
            str(installed / "bin" / "fleetwire"),
            "vboard",
            "--dir",
            str(boards),
            "--link",
            str(tmp_path / "board"),
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PATH=search_path(installed)),
    )
    try:
        port = str(tmp_path / "board1")
        for _ in range(300):
            if os.path.exists(port) or vb.poll() is not None:
                break
            time.sleep(0.1)
        assert os.path.exists(port), vb.stderr.read() if vb.poll() is not None else "no board after 30 s"
        cfg = tmp_path / "device.json"
        cfg.write_text(
            json.dumps(
                dict(
                    device_id="wheel-1",
                    broker=b.host,
                    port=b.port,
                    mqtt_user=b.USER,
                    mqtt_password=b.PASSWORD,
                    wifi_ssid="lab",
                    wifi_password="lab",
                )
            )
        )
        o = make_observer(b, username=b.USER, password=b.PASSWORD)
        o.subscribe("fleet/wheel-1/telemetry", 1)
        r = fw(installed, "deploy", "--port", port, "--config", str(cfg), "--mpy", cwd=tmp_path)
        assert r.returncode == 0, r.stdout + r.stderr
        got = o.wait_for(1, timeout=60)
        assert json.loads(got[0][1])["device_id"] == "wheel-1"
    finally:
        vb.send_signal(signal.SIGINT)
        try:
            vb.wait(20)
        except subprocess.TimeoutExpired:
            vb.kill()


def test_installed_it_runs_the_fleet_report_on_a_small_landing_zone(installed, tmp_path, java):
    zone = tmp_path / "landing"
    r = fw(installed, "gen-telemetry", "--out", str(zone), "--devices", "5", "--hours", "1", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    r = fw(
        installed,
        "report",
        "--input",
        str(zone),
        "--out",
        str(tmp_path / "report"),
        cwd=tmp_path,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert os.path.exists(tmp_path / "report" / "report.html")
    shutil.rmtree(zone)

"""The plugin and the process hygiene: loads without paho, brokers never outlive
the test process, a missing mosquitto says how to install it, failure reports
carry the broker's log."""

import os
import shutil
import subprocess
import sys
import textwrap
import time

import pytest

from fleetwire.host.brokers import mosquitto as mosq


def dead(pid):
    # Gone, or a zombie nobody reaped (a container's PID 1 may not reap).
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def wait_dead(pid, polls=500):
    # Up to 500 polls 20 ms apart: a bound on waiting, not a speed requirement.
    for _ in range(polls):
        if dead(pid):
            return
        time.sleep(0.02)
    pytest.fail("mosquitto %d is still running" % pid)


def run_python(code):
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=60
    )


def test_the_plugin_and_rig_load_without_paho():
    r = run_python("""
        import sys
        sys.modules["paho"] = None  # as if not installed
        import fleetwire.host.testing.pytest_plugin, fleetwire.host.brokers.mosquitto
        import fleetwire.host.testing.scripted_broker
        import fleetwire.host.testing.observer
        try:
            fleetwire.host.testing.observer.Observer("127.0.0.1", 1)
        except ImportError:
            print("ok")
    """)
    assert r.stdout.strip() == "ok", r.stderr


def test_a_forgotten_broker_is_stopped_at_exit():
    r = run_python("""
        from fleetwire.host.brokers.mosquitto import Mosquitto
        b = Mosquitto(persistence=True).start()
        print(b.pid, b.dir)
    """)
    assert r.returncode == 0, r.stderr
    pid, d = r.stdout.split()
    wait_dead(int(pid))
    assert not os.path.exists(d)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_broker_dies_with_a_killed_parent():
    r = run_python("""
        import os, signal
        from fleetwire.host.brokers.mosquitto import Mosquitto
        b = Mosquitto().start()
        print(b.pid, b.dir, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)  # no atexit
    """)
    pid, d = r.stdout.split()
    shutil.rmtree(d)  # nothing else removes it in this case
    wait_dead(int(pid))


def test_missing_mosquitto_says_how_to_install(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(mosq, "FALLBACK_PATHS", (str(tmp_path / "mosquitto"),))
    with pytest.raises(mosq.MosquittoMissing, match="apt-get install -y mosquitto"):
        mosq.Mosquitto()


def test_make_observer_defaults_to_the_session_broker(make_observer, mosquitto):
    o = make_observer()
    assert (o.host, o.port) == (mosquitto.host, mosquitto.port)


FAILING = """
def test_fails(fresh_mosquitto, make_observer):
    b = fresh_mosquitto()
    make_observer(b, client_id="visible-in-the-log")
    assert False
"""


def test_a_failure_report_carries_the_broker_log(tmp_path):
    (tmp_path / "test_failing.py").write_text(FAILING)
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "fleetwire.host.testing.pytest_plugin",
            "-p",
            "no:cacheprovider",
            str(tmp_path / "test_failing.py"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=str(tmp_path),
    )
    assert "1 failed" in r.stdout, r.stdout + r.stderr
    assert "log (tail)" in r.stdout and "as visible-in-the-log" in r.stdout, r.stdout


def test_hil_options_put_the_real_boards_wifi_in_its_config(tmp_path):
    # What the HIL fixture writes to config.json: the Wi-Fi given on the command line
    # for a real board (the password may come from the environment), none if not given.
    (tmp_path / "test_cfg.py").write_text(
        textwrap.dedent("""
        import json
        from fleetwire.host.testing.hil import device_config

        def test_cfg(request):
            print("CFG", json.dumps(device_config(request, ("10.0.0.2", 1883))))
    """)
    )

    def config(*opts, env=None):
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-p",
                "fleetwire.host.testing.hil",
                "-s",
                "-q",
                "-p",
                "no:cacheprovider",
                str(tmp_path / "test_cfg.py"),
            ]
            + list(opts),
            capture_output=True,
            text=True,
            timeout=60,
            cwd=str(tmp_path),
            env=dict(os.environ, **(env or {})),
        )
        line = [x for x in r.stdout.splitlines() if x.startswith("CFG ")]
        assert line, r.stdout + r.stderr
        import json

        return json.loads(line[0][4:])

    real = ["--board", "/dev/ttyUSB0", "--board-broker", "10.0.0.2:1883"]
    cfg = config(*real, "--board-wifi-ssid", "lab 5G", env={"FLEETWIRE_WIFI_PASSWORD": "s3cret"})
    assert (cfg["wifi_ssid"], cfg["wifi_password"], cfg["broker"], cfg["port"]) == (
        "lab 5G",
        "s3cret",
        "10.0.0.2",
        1883,
    )
    assert "wifi_ssid" not in config(*real)  # the board is on the network already
    assert config()["wifi_ssid"] == "hil-lab"  # a virtual board joins any network

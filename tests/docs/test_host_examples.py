"""The documentation's host examples run as written: Python programs on CPython (and, where
the page says so, on the MicroPython unix port too), the example pytest tests as part of this
suite, and the shell examples line by line against the real `fleetwire` command, in a
directory of their own."""

import json
import os
import signal
import subprocess
import sys
import time

from cryptography import x509

from fleetwire.host.rig import micropython

from examples import SNIPPETS, command_lines, snippet

sys.path.insert(0, os.path.join(SNIPPETS, "host"))
# The example tests a user writes with fleetwire's pytest plugins (docs/guides/hil.md,
# docs/guides/resilience.md), collected here as they are: this suite loads the same plugins.
from test_my_board import test_the_board_reports_its_vitals  # noqa: E402,F401
from test_with_proxy import test_a_cut_link_loses_nothing  # noqa: E402,F401

EXAMPLE_TESTS = ("host/test_my_board.py", "host/test_with_proxy.py", "host/conftest.py")
BIN = os.path.dirname(sys.executable)


def shell(name, cwd, env=None, replace=(), timeout=300):
    """Run shell example `name` with bash -e in `cwd`, the venv's commands first on PATH, each
    (old, new) of `replace` replaced first -> its output."""
    src = snippet(name)
    for old, new in replace:
        assert old in src, (name, old)
        src = src.replace(old, new)
    e = dict(os.environ, PATH=BIN + os.pathsep + os.environ["PATH"], **(env or {}))
    r = subprocess.run(
        ["bash", "-e", "-c", src], cwd=str(cwd), env=e, capture_output=True, text=True, timeout=timeout
    )
    assert r.returncode == 0, "%s failed:\n%s%s" % (name, r.stdout, r.stderr)
    return r.stdout + r.stderr


def stopped(pid, sig, timeout=30):
    """Send sig to pid (not this process's child) -> whether it is gone within timeout; killed if not."""
    os.kill(pid, sig)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open("/proc/%d/stat" % pid) as f:
                if f.read().rpartition(")")[2].split()[0] == "Z":
                    return True  # exited; its new parent has not reaped it yet
        except FileNotFoundError:
            return True
        time.sleep(0.1)
    os.kill(pid, signal.SIGKILL)
    return False


def python_on_both(name, board_lib):
    path = os.path.join(SNIPPETS, name)
    cp = subprocess.run([sys.executable, path], capture_output=True, text=True, timeout=60)
    assert cp.returncode == 0, cp.stderr
    mp = micropython.run([path], lib=board_lib, heap="96K")
    assert mp.returncode == 0, mp.stdout + mp.stderr
    assert mp.stdout == cp.stdout  # one source, one behaviour
    return cp.stdout.splitlines()


def test_the_codec_example_decodes_encodes_and_names_the_rule_alike_on_both_interpreters(board_lib):
    assert python_on_both("host/codec.py", board_lib) == [
        "[Publish(topic='a/b', payload=b'hi', qos=1, retain=False, dup=False, packet_id=7)]",
        "32090003612f6200076869",
        "MQTT-3.3.1-4 - PUBLISH with QoS 3 [MQTT-3.3.1-4]",
    ]


def test_the_mqtt5_codec_example_encodes_names_the_reason_and_the_disconnect_code_alike_on_both(board_lib):
    assert python_on_both("host/codec5.py", board_lib) == [
        "321f000f666c6565742f6465762d312f636d64000705020000001e7265626f6f74",
        "True No matching subscribers",
        "Topic Alias 0 is not allowed [MQTT-3.3.2-8] - DISCONNECT with 0x94",
    ]


def test_the_sans_io_example_connects_publishes_and_completes_without_a_socket(board_lib):
    out = python_on_both("host/sans_io.py", board_lib)
    assert out[0].startswith("[Connect(client_id='sensor-17', clean_session=True, keepalive=30,")
    assert out[
        1
    ] == "[Publish(topic='fleet/sensor-17/temp', payload=b'21.5', qos=1, retain=False, dup=False, " + (
        "packet_id=1)]"
    )
    assert out[2:] == ["delivered 1", "pending 0 - next deadline in 29900 ms"]


def test_the_unix_port_example_builds_the_tree_imports_the_client_and_passes_the_selfcheck(tmp_path):
    out = shell("shell/unix_port.sh", tmp_path)
    assert "<class 'MQTTClient'>" in out
    assert (tmp_path / "build" / "board" / "lib" / "fleetwire" / "client.mpy").exists()
    assert out.count(" 0 failed") == 2, out  # MicroPython and CPython


def test_the_build_example_writes_mpy_native_and_source_trees(tmp_path):
    shell("shell/build_variants.sh", tmp_path)
    assert (tmp_path / "build" / "board" / "lib" / "fleetwire" / "session.mpy").exists()
    assert (tmp_path / "build" / "esp32" / "lib" / "fleetwire" / "session.mpy").exists()
    assert (tmp_path / "build" / "src" / "lib" / "fleetwire" / "session.py").exists()


def test_the_identity_example_makes_the_ca_the_broker_config_and_the_host_credentials(tmp_path):
    out = shell("shell/identity_ca.sh", tmp_path, env={"HOME": str(tmp_path)})
    ca = tmp_path / ".fleetwire" / "ca"
    assert (ca / "ca.pem").exists() and oct((ca / "ca.key").stat().st_mode & 0o777) == "0o600"
    for f in ("mosquitto.conf", "acl", "crl.pem", "server.pem", "server.key", "systemd-limits.conf"):
        assert (tmp_path / "broker" / f).exists(), f
    assert "max_connections 12000\n" in (tmp_path / "broker" / "mosquitto.conf").read_text()
    assert "LimitNOFILE=12064\n" in (tmp_path / "broker" / "systemd-limits.conf").read_text()
    for f in ("collector.pem", "collector.key", "operator.pem", "operator.key", "ca.pem"):
        assert (tmp_path / "creds" / f).exists(), f
    listed = [line.split()[:2] for line in out.splitlines() if "current" in line]
    assert sorted(listed) == [
        ["broker.local", "server"],
        ["collector", "collector"],
        ["operator", "operator"],
    ]
    assert "PRIVATE KEY" not in out  # no command prints a key


def test_the_renewal_example_serves_the_fleet_ca_and_orders_a_board_to_renew(
    tmp_path, fleet_ca, identity_mosquitto, host_credentials, make_observer
):
    # the issuer (`ca serve`, in the background) and the order, against a broker that enforces
    # identity; the board is played by a client with a board's certificate
    import shutil

    from fleetwire.host.identity import pki

    me = "docs-renew-%d" % os.getpid()
    creds = tmp_path / "creds"
    creds.mkdir()
    cert, key = host_credentials("operator")
    shutil.copy(cert, str(creds / "operator.pem"))
    shutil.copy(key, str(creds / "operator.key"))
    shutil.copy(identity_mosquitto.ca_pem, str(creds / "ca.pem"))
    board = make_observer(identity_mosquitto, identity=(me, "device"))
    old = pki.load_certificate(host_credentials(me, "device")[0])
    board.subscribe("fleet/%s/cert/#" % me, 1)
    b = identity_mosquitto
    try:
        shell(
            "shell/identity_renew.sh",
            tmp_path,
            env={"FLEETWIRE_CA": fleet_ca.dir},
            replace=[
                ("broker.local:8883", "127.0.0.1:%d" % b.port),
                ("sensor-17", me),
                (
                    '"systemctl reload mosquitto" &',
                    '"kill -HUP %d" > serve.log 2>&1 & echo $! > serve.pid; sleep 3' % b.proc.pid,
                ),
            ],
        )
        board.wait_until(lambda m: any(x[0] == "fleet/%s/cert/renew" % me for x in m), timeout=30)
        board.publish("fleet/%s/cert_req" % me, pki.der(old), qos=1)
        got = board.wait_until(lambda m: any(x[0] == "fleet/%s/cert/new" % me for x in m), timeout=30)
        new = x509.load_der_x509_certificate([x[1] for x in got if x[0].endswith("/cert/new")][0])
        assert pki.common_name(new) == me and new.public_key() == old.public_key()
        board.publish("fleet/%s/cert_ok" % me, "ok %x %x" % (new.serial_number, old.serial_number), qos=1)
        deadline = time.monotonic() + 30
        while not fleet_ca.revoked(old) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert fleet_ca.revoked(old) and not fleet_ca.revoked(new)
    finally:
        pid = tmp_path / "serve.pid"
        if pid.exists():
            # a script's `cmd &` starts it with SIGINT ignored: a service stops on SIGTERM, and
            # must have stopped before the session's other issuers use the same CA
            assert stopped(int(pid.read_text()), signal.SIGTERM), "ca serve did not stop on SIGTERM"
    log = (tmp_path / "serve.log").read_text()
    assert "issuing for fleetwire fleet CA" in log and "PRIVATE KEY" not in log


def test_the_rollout_example_makes_the_release_key_and_bundles_the_app(tmp_path):
    (tmp_path / "app.py").write_text(snippet("device/app.py"))
    # the first two lines run; the rollout itself needs a fleet: its line is parsed by
    # test_snippets.py, and tests/ota/test_rollout.py rolls out through the CLI
    for src in command_lines("shell/rollout.sh")[:2]:
        r = subprocess.run(
            [BIN + "/" + src.split()[0]] + src.split()[1:],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            env=dict(os.environ, HOME=str(tmp_path)),
        )
        assert r.returncode == 0, r.stderr
        assert "PRIVATE KEY" not in r.stdout + r.stderr
    from fleetwire.host.identity.signing import ReleaseKeys
    from fleetwire.host.rollout.release import Release, unpack

    keys = ReleaseKeys(str(tmp_path / ".fleetwire" / "release"))  # where --release-keys points
    assert keys.seq == 1 and len(keys.ids) == 1
    assert "--release-keys ~/.fleetwire/release" in command_lines("shell/rollout.sh")[2]

    rel = Release.from_file(str(tmp_path / "app-1.5.0.fwb"))
    assert (rel.kind, rel.version) == ("app", "1.5.0")
    files = unpack(rel.data)
    assert "app.mpy" in files and "lib/fleetwire/client.mpy" in files  # compiled, as a board loads them


def test_the_key_rotation_example_sends_each_board_the_new_set_then_the_old_key_retired(
    tmp_path, mosquitto, make_observer
):
    import json

    from fleetwire.host.identity.signing import ReleaseKeys, opened

    home = {"HOME": str(tmp_path)}
    # the key made as the rollout example makes it (its first line)
    init = command_lines("shell/rollout.sh")[0]
    assert init == "fleetwire release init"
    subprocess.run(
        [BIN + "/fleetwire", "release", "init"], env=dict(os.environ, **home), check=True, capture_output=True
    )
    first = ReleaseKeys(str(tmp_path / ".fleetwire" / "release"))
    deployed = first.key_set()  # what the boards hold
    ids = ["docs-keys-%d-%d" % (os.getpid(), i) for i in (1, 2)]
    (tmp_path / "fleet.txt").write_text("".join(i + "\n" for i in ids))
    login = (
        "--broker broker.local:8883 --tls-ca creds/ca.pem --cert creds/operator.pem \\\n"
        "    --key creds/operator.key"
    )
    out = shell(
        "shell/release_keys.sh",
        tmp_path,
        env=home,
        replace=[(login, "--broker 127.0.0.1:%d" % mosquitto.port)],
    )
    assert out.count("published to 2 devices") == 2 and "PRIVATE KEY" not in out
    keys = ReleaseKeys(str(tmp_path / ".fleetwire" / "release"))
    assert keys.seq == 3 and keys.ids == [keys.signing_id] != first.ids
    assert "%s  signs" % keys.signing_id in out and "%s  retired" % first.signing_id in out
    watcher = make_observer(mosquitto)
    watcher.subscribe("fleet/+/ota/keys", 1)
    got = watcher.wait_for(2, timeout=60)
    try:
        assert sorted(t for t, *_ in got) == ["fleet/%s/ota/keys" % i for i in ids]
        for _, payload, _, retained in got:
            # retained, the newest set, and signed by the key the boards were deployed with
            assert retained and opened(payload, deployed) == {
                "v": 1,
                "op": "keys",
                "seq": 3,
                "keys": keys.key_set()["keys"],
            }
    finally:
        for i in ids:
            watcher.publish("fleet/%s/ota/keys" % i, b"", 1, retain=True)  # nothing left on the broker
    assert json.loads(got[0][1])["key"] == first.signing_id


def test_the_spark_submit_example_names_a_script_that_runs_the_report(tmp_path):
    from fleetwire.tools import cli

    lines = command_lines("shell/spark_submit.sh")
    assert len(lines) == 1
    cmd = lines[0]
    py = cmd.split('"$(', 1)[1].split(')"', 1)[0]
    script = subprocess.run(
        ["bash", "-c", py],
        capture_output=True,
        text=True,
        env=dict(os.environ, PATH=BIN + ":" + os.environ["PATH"]),
    ).stdout.strip()
    assert script.endswith("report.py") and os.path.exists(script)
    r = subprocess.run([sys.executable, script, "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and "--incremental" in r.stdout, r.stderr  # runs as spark-submit runs it
    args = cmd.split(')"', 1)[1].split()
    parser, _ = cli.parser(only="report")
    parser.parse_args(["report"] + args)


def test_the_proxy_example_forwards_mqtt_with_its_script(tmp_path, mosquitto, make_observer):
    from fleetwire.host.brokers.base import free_port
    from fleetwire.host.testing.observer import Observer

    (tmp_path / "chaos.txt").write_text(snippet("files/chaos.txt"))
    port = free_port()
    line = command_lines("shell/proxy.sh")[0]
    line = line.replace("127.0.0.1:1884", "127.0.0.1:%d" % port).replace(
        "127.0.0.1:1883", "127.0.0.1:%d" % mosquitto.port
    )
    proxy = subprocess.Popen(
        ["bash", "-c", "exec " + line],
        cwd=tmp_path,
        env=dict(os.environ, PATH=BIN + ":" + os.environ["PATH"]),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        watcher = make_observer(mosquitto)
        watcher.subscribe("fleet/sensor-17/status", 1)
        import time

        from fleetwire.host.brokers.base import accepts

        deadline = time.monotonic() + 60  # a deadline: a loaded machine's start-up, not a speed
        while not accepts("127.0.0.1", port):  # until the proxy listens
            assert time.monotonic() < deadline, "the proxy never listened"
            time.sleep(0.1)
        client = Observer("127.0.0.1", port)
        client.publish("fleet/sensor-17/status", b"through the proxy", qos=1)
        assert watcher.wait_for(1, timeout=60)[0][1] == b"through the proxy"
        client.close()
    finally:
        proxy.send_signal(signal.SIGINT)
        out = proxy.communicate(timeout=60)[0]
    assert "PUBLISH" in out, out  # it prints every packet


def test_the_simulator_and_collector_example_lands_every_devices_records(tmp_path, mosquitto):
    import glob
    import json

    shell("shell/sim_collect.sh", tmp_path, replace=[("127.0.0.1:1883", "127.0.0.1:%d" % mosquitto.port)])
    files = glob.glob(str(tmp_path / "landing" / "date=*" / "hour=*" / "*.ndjson"))
    assert files
    records = [json.loads(line) for f in files for line in open(f)]
    assert len({r["device_id"] for r in records}) == 20
    assert all("rx_ts" in r for r in records)
    lag = glob.glob(str(tmp_path / "landing" / "_sim" / "*.json"))  # the simulator's own lag, for the report
    assert len(lag) == 1 and json.load(open(lag[0]))["records_due"] >= 20


def test_the_example_tests_are_collected_here():
    assert test_the_board_reports_its_vitals.__module__ == "test_my_board"
    assert test_a_cut_link_loses_nothing.__module__ == "test_with_proxy"
    assert all(os.path.exists(os.path.join(SNIPPETS, n)) for n in EXAMPLE_TESTS)


def test_the_symbolicate_example_names_the_source_lines_and_function_of_each_frame(tmp_path):
    from fleetwire.host.rig import build

    build.build(str(tmp_path / "build"), mpy=True)  # as fleetwire bundle builds a release's tree
    os.rename(str(tmp_path / "build" / build.SYMBOLS), str(tmp_path / "app-1.5.0.symbols.json"))
    tb = (
        "Traceback (most recent call last):\n"
        '  File "app.py", line 14, in step\n'
        '  File "client.py", line 1, in publish\n'
        "QueueFull: the queue is full\n"
    )
    (tmp_path / "crash.json").write_text(json.dumps({"traceback": tb}))
    path = os.path.join(SNIPPETS, "host/symbolicate.py")
    r = subprocess.run(
        [sys.executable, path, "crash.json", "app-1.5.0.symbols.json"],
        cwd=str(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    assert out[1] == '  File "app.py", line 14, in step'  # built with its lines: as it was
    assert out[2].startswith('  File "device/client.py", line ') and out[2].endswith(
        " (MQTTClient.publish), in publish"
    )
    assert out[3] == "QueueFull: the queue is full"

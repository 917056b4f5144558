"""The broker's limits (`fleetwire broker-config --max-connections`) and the simulator's own:
mosquitto takes at most max_connections clients and keeps serving those it has when one more
comes; the configuration says how many file descriptors that takes and why; the simulator
says when a process may not open a socket per device, and what to do."""

import os
import resource
import subprocess
import sys
import threading

from fleetwire.host.brokers.mosquitto import find_mosquitto, free_port
from fleetwire.host.identity import brokerconf, pki
from fleetwire.host.identity.login import paho_client
from fleetwire.host.testing.hil import wait


def cli(*args, timeout=120, **kw):
    return subprocess.run(
        [sys.executable, "-m", "fleetwire.tools.cli"] + [str(a) for a in args],
        capture_output=True,
        text=True,
        timeout=timeout,
        **kw,
    )


def test_the_broker_takes_at_most_max_connections_and_says_how_many_descriptors_that_needs(tmp_path):
    ca = pki.FleetCA.create(str(tmp_path / "ca"))
    brk, port = tmp_path / "broker", free_port()
    user = ["--user", "root"] if os.geteuid() == 0 else []
    r = cli(
        "broker-config", "--ca", ca.dir, "--host", "127.0.0.1", "--port", port, "--bind", "127.0.0.1",
        "--out", brk, "--max-connections", "3", *user,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert (
        "at most 3 clients (max_connections)" in r.stdout and "open-file limit of %d" % (3 + 64) in r.stdout
    )
    assert brokerconf.DROPIN in r.stdout
    conf = (brk / "mosquitto.conf").read_text()
    assert "max_connections 3\n" in conf and "ulimit -n 67" in conf
    assert "LimitNOFILE=67\n" in (brk / "systemd-limits.conf").read_text()
    broker = subprocess.Popen(
        [find_mosquitto(), "-c", str(brk / "mosquitto.conf")], stderr=subprocess.DEVNULL
    )
    clients = []
    try:
        for i in range(4):
            cert, key = ca.credentials("dev-%d" % i, "device", str(tmp_path / "creds"))
            c = paho_client("dev-%d" % i, True, tls=(ca.cert_path, cert, key))
            c.up = threading.Event()
            c.on_connect = lambda cl, u, f, rc, p: rc == 0 and cl.up.set()
            c.connect_async("127.0.0.1", port, keepalive=30)
            c.loop_start()
            clients.append(c)
            if i < 3:
                assert wait(c.up.is_set, 30), "client %d of 3 was not let in" % i
        assert not wait(clients[3].up.is_set, 3)  # the fourth is turned away
        assert all(c.is_connected() for c in clients[:3])  # the others are served on
    finally:
        for c in clients:
            c.disconnect()
            c.loop_stop()
        broker.terminate()
        broker.wait(10)


def _low_fd_limit():
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))


def test_a_simulator_that_may_not_open_a_socket_per_device_says_so_and_what_to_do():
    r = cli("sim", "--devices", "1000", "--broker", "127.0.0.1:1", "--quiet", preexec_fn=_low_fd_limit)
    assert r.returncode == 2
    assert "needs 1164 open files (a socket per device)" in r.stderr and "may open 256 at most" in r.stderr
    assert "--workers" in r.stderr

"""The operator's connection (fleetwire.host.command.operator.Operator.start())."""

import subprocess
import sys

PROGRAM = """
import os, resource, sys
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(4096, hard), hard))
files = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]  # a fleet simulator's sockets
from fleetwire.host.command.operator import NotConnected, Operator
try:
    Operator(sys.argv[1], int(sys.argv[2])).start(timeout=30)
except NotConnected as e:
    print("NotConnected:", e)
"""


def test_an_operator_in_a_process_with_a_thousand_files_open_says_why_it_cannot_connect(mosquitto):
    # paho-mqtt's network loop is select(), which takes no file descriptor past 1023: its
    # thread died on the first call and the operator waited out its timeout for nothing
    r = subprocess.run(
        [sys.executable, "-c", PROGRAM, mosquitto.host, str(mosquitto.port)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("NotConnected: this client's socket is file descriptor 1"), r.stdout
    assert "select() takes none past 1023: connect it before" in r.stdout, r.stdout

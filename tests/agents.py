"""Device agents for the tests: run the real client as a device process — MicroPython's unix port with an
80 KB heap, and CPython — and script it over stdin/stdout (tests/device/agent.py). A test that takes the
`front` fixture runs once with MQTTClient and once with fleetwire.aio.AsyncClient, the same commands."""

import json
import os
import queue
import subprocess
import threading

import pytest


AGENT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "device", "agent.py")
from support import device_command  # noqa: E402


@pytest.fixture(scope="session")
def agent_lib(tmp_path_factory):
    """The agent programs (tests/device/agent*.py) compiled by mpy-cross, as a board holds a
    program: compiled from source, their bytecode took the device heap's margin (an asyncio
    test then failed now and then for want of 3 KB) -> the directory for MICROPYPATH."""
    import glob

    from fleetwire.host.rig.build import mpy_cross_command

    out = str(tmp_path_factory.mktemp("agents"))
    for src in glob.glob(os.path.join(os.path.dirname(AGENT), "agent*.py")):
        dst = os.path.join(out, os.path.basename(src)[:-3] + ".mpy")
        subprocess.run([mpy_cross_command(), "-O3", "-o", dst, src], check=True)
    return out


class Agent:
    def __init__(self, interp, board_lib, client_id, front="blocking", extra_heap_kb=0, agent_lib=None):
        self.interp = interp
        self.client_id = client_id
        self.front = front
        cmd, env = device_command(interp, board_lib, AGENT, extra_heap_kb)
        if interp == "micropython" and agent_lib:
            cmd[-1:] = ["-m", "agent"]
            env["MICROPYPATH"] = agent_lib + os.pathsep + env["MICROPYPATH"]
        self.proc = subprocess.Popen(
            cmd + [front],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        self._lines = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self):
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def call(self, op, timeout=30, **kw):
        """Send one command; -> the reply dict. Fails the test if the device errs."""
        reply = self.try_call(op, timeout, **kw)
        assert reply["ok"], "%s %s on %s: %s" % (op, kw, self.interp, reply["error"])
        return reply

    def try_call(self, op, timeout=30, **kw):
        self.begin(op, **kw)
        return self.result(timeout)

    def begin(self, op, **kw):
        """Send a command without waiting for its reply (the test plays the broker meanwhile)."""
        kw["op"] = op
        self.proc.stdin.write(json.dumps(kw) + "\n")
        self.proc.stdin.flush()

    def result(self, timeout=30):
        """The reply to the oldest command sent with begin()."""
        op = "command"
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError("device gave no answer to %s within %d s" % (op, timeout))
        if line is None:
            raise AssertionError("device process ended: %s" % self.proc.stderr.read())
        if not line.startswith("{"):  # the device printed a traceback: show all of it
            rest = [line]
            while rest[-1] is not None:
                try:
                    rest.append(self._lines.get(timeout=2))
                except queue.Empty:
                    break
            raise AssertionError("device failed: %s" % "".join(x for x in rest if x))
        return json.loads(line)

    def kill(self):
        self.proc.kill()
        self.proc.wait()

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()


@pytest.fixture(params=["micropython", "cpython"])
def interp(request):
    return request.param


@pytest.fixture(params=["blocking", "asyncio"])
def front(request):
    """The client's front under test: MQTTClient, or fleetwire.aio.AsyncClient."""
    return request.param


@pytest.fixture
def device(interp, board_lib, agent_lib, request):
    """device(client_id) -> a running Agent on the interpreter under test (and the front
    under test, for a test that takes `front`; else MQTTClient). A test module's
    EXTRA_HEAP_KB ({front: KB}) gives its agents that much more heap (and says why)."""
    agents = []
    n = [0]
    fr = request.getfixturevalue("front") if "front" in request.fixturenames else "blocking"
    extra = getattr(request.module, "EXTRA_HEAP_KB", {}).get(fr, 0)

    def make(client_id=None):
        n[0] += 1
        cid = client_id or "%s-%s-%d" % (request.node.name[:30], interp[:2], n[0])
        a = Agent(interp, board_lib, cid, fr, extra, agent_lib)
        agents.append(a)
        return a

    yield make
    for a in agents:
        a.close()

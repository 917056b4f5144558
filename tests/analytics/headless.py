"""Headless Chromium for the tests that look at a page as a person does: load it at a given screen
size (a laptop's, a phone's) and run a script in it, over the DevTools protocol on a pipe
(--remote-debugging-pipe: NUL-separated JSON on the child's fds 3 and 4), so the standard library
is enough. The network is never needed: pages come from file://."""

import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time

LAPTOP = {"width": 1366, "height": 768, "deviceScaleFactor": 1, "mobile": False}
# mobile: the page is laid out as a phone lays it out (its meta viewport is honoured; without one
# a phone lays it out 980 px wide and shrinks it)
PHONE = {"width": 390, "height": 844, "deviceScaleFactor": 3, "mobile": True}

FLAGS = [
    "--headless",
    "--no-sandbox",  # the suite runs as root
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--remote-debugging-pipe",
]


class Missing(RuntimeError):
    pass


def find():
    """The chromium executable, or Missing saying how to install it."""
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    raise Missing(
        "headless Chromium is needed to check report.html's layout and is not installed: "
        "bash tools/run.sh setup installs it (or apt-get install -y chromium)"
    )


class Chromium:
    """with Chromium() as c: c.page(url, PHONE, script) -> the script's value."""

    def __init__(self, exe=None, timeout=60):
        self.timeout = timeout
        self.profile = tempfile.mkdtemp(prefix="fleetwire-chromium-")
        # the pipe ends moved above 9, so that bash's 3<& and 4>& cannot overwrite one another (dash,
        # Debian's sh, takes one-digit descriptors only)
        cmd_r, self.cmd_w = os.pipe()
        self.evt_r, evt_w = os.pipe()
        cmd_r, evt_w = (fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (cmd_r, evt_w))
        self.log = open(os.path.join(self.profile, "chromium.log"), "wb")
        self.proc = subprocess.Popen(
            ["bash", "-c", 'exec "$0" "$@" 3<&%d 4>&%d' % (cmd_r, evt_w), exe or find()]
            + FLAGS
            + ["--user-data-dir=" + self.profile, "about:blank"],
            pass_fds=(cmd_r, evt_w),
            stdin=subprocess.DEVNULL,
            stdout=self.log,
            stderr=self.log,
        )
        for fd in (cmd_r, evt_w):
            os.close(fd)
        self.buf = b""
        self.events = []
        self.next_id = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        if self.proc.poll() is None:
            self.timeout = 10
            try:
                self.call("Browser.close")
            except Exception:  # noqa: BLE001 - it is going away either way
                pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self.cmd_w, self.evt_r):
            os.close(fd)
        self.log.close()
        shutil.rmtree(self.profile, ignore_errors=True)

    def _fail(self, what):
        self.log.flush()
        with open(self.log.name, "rb") as f:
            tail = f.read()[-2000:].decode(errors="replace")
        raise RuntimeError("chromium: %s\n%s" % (what, tail))

    def _read(self, deadline):
        while b"\0" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.evt_r], [], [], left)[0]:
                self._fail("no answer in %d s" % self.timeout)
            chunk = os.read(self.evt_r, 1 << 16)
            if not chunk:
                self._fail("exited (%s)" % self.proc.poll())
            self.buf += chunk
        msg, self.buf = self.buf.split(b"\0", 1)
        return json.loads(msg)

    def call(self, method, params=None, session=None):
        """Send a command and wait for its answer (events that come meanwhile are kept)."""
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.cmd_w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            m = self._read(deadline)
            if m.get("id") == self.next_id:
                if "error" in m:
                    raise RuntimeError("%s: %s" % (method, m["error"]))
                return m.get("result", {})
            self.events.append(m)

    def wait_event(self, method, session):
        deadline = time.monotonic() + self.timeout
        while True:
            for i, m in enumerate(self.events):
                if m.get("method") == method and m.get("sessionId") == session:
                    return self.events.pop(i)
            self.events.append(self._read(deadline))

    def page(self, url, screen, script):
        """Open url in a new tab the size of `screen` (LAPTOP, PHONE), wait until it has loaded
        (its images too), run `script` (an expression) -> its value."""
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        s = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        try:
            self.call("Emulation.setDeviceMetricsOverride", screen, s)
            self.call("Page.enable", None, s)
            self.call("Page.navigate", {"url": url}, s)
            self.wait_event("Page.loadEventFired", s)
            r = self.call("Runtime.evaluate", {"expression": script, "returnByValue": True}, s)
            if "exceptionDetails" in r:
                raise RuntimeError("the script failed: %s" % r["exceptionDetails"])
            return r["result"]["value"]
        finally:
            self.call("Target.closeTarget", {"targetId": target})


# What a person sees of the page's tables: the width the page is laid out at, how wide the page
# is (wider: it scrolls sideways), and for each table (named by the heading before it) its width
# and the box it is seen through: the nearest ancestor that scrolls sideways, or else the table.
LAYOUT = """(() => {
  const de = document.documentElement;
  const heads = [...document.querySelectorAll('h1, h2')];
  const tables = [...document.querySelectorAll('table')].map(t => {
    let box = t;
    for (let a = t.parentElement; a && a !== document.body; a = a.parentElement) {
      if (['auto', 'scroll'].includes(getComputedStyle(a).overflowX)) { box = a; break; }
    }
    const before = heads.filter(h => h.compareDocumentPosition(t) & Node.DOCUMENT_POSITION_FOLLOWING);
    const r = box.getBoundingClientRect();
    return {
      section: before.length ? before[before.length - 1].textContent : '',
      width: Math.ceil(t.getBoundingClientRect().width),
      box_left: Math.floor(r.left),
      box_right: Math.ceil(r.right),
      scrolls: box !== t,
    };
  });
  return {viewport: de.clientWidth, page: de.scrollWidth, tables: tables};
})()"""


def layout(browser, path, screen):
    """LAYOUT's figures for the page at `path` on `screen`."""
    return browser.page("file://" + os.path.abspath(path), screen, LAYOUT)

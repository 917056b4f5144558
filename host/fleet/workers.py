"""A simulated fleet over several processes: Fleet runs fleetwire.host.fleet.sim's devices in
`workers` worker processes (fleetwire.host.fleet.worker), as one CPython process saturates a
core at about 3,000 devices (bench/README.md, "Fleet simulator").

- Device i runs in worker i % workers, always: its id (sim-<i>), its certificate, its random
  draws (seeded by the run's seed and i), its store and state are the same in any worker.
- With a fleet CA the parent issues every certificate once (one write of the CA's index), into
  a directory the workers load them from and that is removed at the end.
- Every worker starts its clock from the same instant (CLOCK_MONOTONIC is the machine's), so
  records' times agree across workers, in compressed time too.
- The summary adds up every worker's counts, with each worker's own; a worker that dies is
  reported (its exit status, the tail of its stderr), its last counts kept in the totals and
  marked as such, never silently missing."""

import collections
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

from fleetwire.host.fleet import lag as lagmod
from fleetwire.host.fleet.device import Clock, Identities
from fleetwire.host.fleet.sim import device_id, fd_needed, raise_fd_limit

COUNTS = ("sent", "acked", "records_acked", "errors", "publish_fail", "boots", "crashes", "wifi_drops")


class WorkerError(RuntimeError):
    """A worker could not start its share of the fleet (it said why on stderr)."""


def share(i, devices, workers):
    """The device numbers worker i runs."""
    return list(range(i, devices, workers))


class _Worker:
    def __init__(self, i, only):
        self.i = i
        self.only = only
        self.proc = None
        self.ready = threading.Event()
        self.status = {}  # its last status (counts so far)
        self.summary = None  # its summary, once it finished
        self.silent_at_h = {}
        self.stderr = None
        self.listener = None  # the thread reading its stdout
        self.t_died = None

    def exit_words(self):
        rc = self.proc.returncode
        if rc is None:
            return "still running"
        if rc < 0:
            try:
                return "killed by %s" % signal.Signals(-rc).name
            except ValueError:
                return "killed by signal %d" % -rc
        return "exit status %d" % rc

    def stderr_tail(self, n=600):
        try:
            with open(self.stderr.name, errors="replace") as f:
                return f.read()[-n:].strip()
        except OSError:
            return ""


class Fleet:
    """Fleet(host, port, devices=200, workers=2, ...): the options of Simulator, over `workers`
    processes. run() blocks and returns the summary; started, stop_after(), versions(),
    silent(), connected() and the counts work from another thread while it runs."""

    def __init__(
        self,
        host,
        port,
        devices=200,
        workers=2,
        period_s=60,
        speed=1.0,
        hours=None,
        duration=None,
        seed=1,
        ca=None,
        tls_ca=None,
        progress=None,
        boards=0,
        start_timeout=None,
        **options,
    ):
        if workers < 1 or workers > devices:
            raise ValueError("workers: 1 to the number of devices (%d), not %d" % (devices, workers))
        if boards and speed != 1:
            raise ValueError(
                "virtual boards run on their own clock, in real time: boards need speed 1, not %g" % speed
            )
        self.host, self.port = host, port
        self.n = devices
        self.n_workers = workers
        self.period_s, self.speed, self.seed = period_s, speed, seed
        if duration is None:
            duration = (hours or 1) * 3600 / speed
        self.duration = duration
        self.hours = duration * speed / 3600
        self.ca, self.tls_ca = ca, tls_ca
        self.progress = progress
        self.n_boards = boards  # virtual boards run in worker 0
        self.options = options
        # issuing and loading certificates: about 2 ms a device (bench/README.md), generous
        self.start_timeout = start_timeout or 120 + 0.05 * devices
        self.workers = [_Worker(i, share(i, devices, workers)) for i in range(workers)]
        self.started = threading.Event()
        self.clock = Clock(speed)
        self.end = None
        self._lock = threading.Lock()

    # ---- while it runs (any thread)

    def stop_after(self, seconds):
        """End the run `seconds` from now."""
        self.end = time.monotonic() + seconds
        for w in self.workers:
            self._tell(w, {"end": self.end})

    def total(self, name):
        return sum((w.summary or w.status).get(name, 0) for w in self.workers)

    sent = property(lambda self: self.total("sent"))
    acked = property(lambda self: self.total("acked"))
    crashes = property(lambda self: self.total("crashes"))
    drops = property(lambda self: self.total("wifi_drops"))
    errors = property(lambda self: self.total("errors"))

    def connected(self):
        return sum(w.status.get("connected", 0) for w in self.workers if w.summary is None)

    def versions(self):
        out = collections.Counter()
        for w in self.workers:
            out.update(w.status.get("versions", {}))
        return dict(out)

    def silent(self):
        h = self.clock.hours()
        return sorted(d for w in self.workers for d, at in w.silent_at_h.items() if at <= h)

    @property
    def lag(self):
        fleet = self

        class _Lag:  # what progress_line asks of a simulator's lag
            def summary(self):
                return lagmod.merge([w.status.get("lag") for w in fleet.workers])

        return _Lag()

    # ---- the run

    def run(self):
        """Start the workers, run, stop -> the summary (the workers' counts added up)."""
        # each worker needs a socket per device of its share: checked here, before any starts
        raise_fd_limit(fd_needed(max(len(w.only) for w in self.workers)))
        keys = None
        try:
            if self.ca is not None:
                keys = tempfile.mkdtemp(prefix="fleetwire-sim-identities-")  # mode 700
                Identities(self.ca, keys, self.tls_ca).issue(
                    [device_id(i) for i in range(self.n)], contexts=False
                )
            for w in self.workers:
                self._spawn(w, keys)
            self._wait_ready()
            t0 = time.monotonic() + 0.5
            start_ms = int((time.time() + 0.5) * 1000)
            self.clock = Clock(self.speed, start_ms, t0)
            for w in self.workers:
                self._tell(w, {"go": [t0, start_ms]})
                if self.end is not None:
                    self._tell(w, {"end": self.end})
            self.started.set()
            while any(w.proc.poll() is None for w in self.workers):
                time.sleep(0.5)
                if self.progress:
                    self.progress(self)
            for w in self.workers:
                w.proc.wait()
                w.listener.join()  # its last lines (the summary) read before it is judged
            return self.summary()
        finally:
            for w in self.workers:
                if w.proc is not None and w.proc.poll() is None:
                    w.proc.kill()
                    w.proc.wait()
                if w.stderr is not None:
                    w.stderr.close()
                    os.unlink(w.stderr.name)
            if keys:
                shutil.rmtree(keys, ignore_errors=True)

    def _spawn(self, w, keys):
        opts = dict(
            self.options,
            host=self.host,
            port=self.port,
            devices=self.n,
            only=w.only,
            period_s=self.period_s,
            speed=self.speed,
            duration=self.duration,
            seed=self.seed,
            ca=self.ca.dir if self.ca is not None else None,
            identities=keys,
            tls_ca=self.tls_ca,
            boards=self.n_boards if w.i == 0 else 0,
        )
        w.stderr = tempfile.NamedTemporaryFile(
            prefix="fleetwire-worker-%d-" % w.i, suffix=".log", delete=False
        )
        w.proc = subprocess.Popen(
            [sys.executable, "-m", "fleetwire.host.fleet.worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=w.stderr,
            text=True,
            bufsize=1,
        )
        self._tell(w, opts)
        w.listener = threading.Thread(target=self._listen, args=(w,), daemon=True)
        w.listener.start()

    def _tell(self, w, msg):
        try:
            w.proc.stdin.write(json.dumps(msg) + "\n")
            w.proc.stdin.flush()
        except (OSError, ValueError, AttributeError):
            pass  # gone: run() reports it

    def _listen(self, w):
        for line in w.proc.stdout:
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if "ready" in msg:
                w.ready.set()
            if "status" in msg:
                w.status = msg["status"]
                if "silent_at_h" in msg["status"]:
                    w.silent_at_h = msg["status"]["silent_at_h"]
            if "summary" in msg:
                w.summary = msg["summary"]
        if w.summary is None:
            w.t_died = time.monotonic()

    def _wait_ready(self):
        deadline = time.monotonic() + self.start_timeout
        for w in self.workers:
            while not w.ready.wait(0.2):
                if w.proc.poll() is not None or time.monotonic() > deadline:
                    why = (
                        w.exit_words()
                        if w.proc.poll() is not None
                        else "not ready in %.0f s" % self.start_timeout
                    )
                    raise WorkerError(
                        "simulator worker %d (%d devices) did not start: %s\n%s"
                        % (w.i, len(w.only), why, w.stderr_tail())
                    )

    def summary(self):
        per = []
        for w in self.workers:
            s = w.summary or w.status
            row = {"worker": w.i, "pid": w.proc.pid, "devices": len(w.only)}
            row.update({k: s.get(k, 0) for k in COUNTS})
            if w.summary is not None:
                row["status"] = "done"
            else:
                row["status"] = "died"
                row["died"] = "%s, %.0f s into the run; its counts are its last report (1 s before)" % (
                    w.exit_words(),
                    max(0.0, (w.t_died or time.monotonic()) - self.clock.t0),
                )
                row["stderr"] = w.stderr_tail()
            per.append(row)
        last_errors = [(w.summary or w.status).get("last_error") for w in self.workers]
        boards = (self.workers[0].summary or {}).get("boards", [])
        out = {"devices": self.n, "workers": self.n_workers}
        out.update({k: sum(r[k] for r in per) for k in COUNTS})
        out["unacked"] = out["sent"] - out["acked"]
        out.update(
            simulated_hours=round(self.hours, 2),
            boards=boards,
            last_error=next((e for e in last_errors if e), None),
            lag=lagmod.merge([(w.summary or w.status).get("lag") for w in self.workers]),
            workers_died=[r["worker"] for r in per if r["status"] == "died"],
            per_worker=per,
        )
        return out

"""The fleet simulator: N devices, each fleetwire's own asyncio client and vitals
agent, in one CPython process against a real broker. What the devices live through
is drawn from a seeded random generator:

- a firmware rollout: part of the fleet moves from one release to the next during
  the run (a deliberate reset each), and the newer release crashes more often;
- crashes (panic, watchdog, brownout) and reboots: boot_id goes up, uptime and heap
  start over, and records not yet acknowledged survive in the device's "flash" (a
  ring store over RAM that outlives the reboot);
- Wi-Fi drops: the link goes away for a while; records wait in the store and go
  out in order afterwards;
- leaking heaps, draining batteries (some devices are on mains: no vbat), RSSI
  wandering around each device's own level, and a few devices that go silent.

Time can be compressed: with speed=120 a device with a 60 s period publishes every
0.5 s of real time and the records' `ts` advance by 60 s each, so two minutes of
real time make four simulated hours.

Commands (commands=True): every device takes commands as a board does, with fleetwire.cmd itself
(its journal in the device's RAM, surviving its reboots): "ping" answers the release it runs,
"period" sets its vitals period; `commands_run` counts the command messages taken.

Updates (ota=True): every device takes releases over MQTT as a board does, with fleetwire.ota
itself (the signature, the offer, the chunks pulled in windows, the SHA-256, the trial and the
rollback), its "flash" in RAM; release_keys is the key set each was deployed with
(fleetwire.host.identity.signing.ReleaseKeys.key_set()): without it a device refuses every
release. What a release does to a device is the simulation's: each version has a crash rate
and a share of boots that crash at once (`profiles`; make one bad with
bad=["1.5.0"]), so a staged rollout (fleetwire.host.rollout.staged) sees a bad release crash more,
and roll back on the devices whose first boot of it crashed.

A few devices can be virtual boards (`boards=`): the MicroPython unix port behind a
pseudo-terminal, deployed with `fleetwire deploy` as a board is, running the board's
own main.py (client, flash store, vitals agent) against the same broker. A board's
clock is the interpreter's, so boards run only in real time (speed=1).

With a fleet CA (`ca=`) every device has an identity of its own, as a deployed board
has: a key and a certificate whose CN is its id (issued at start, valid two days), and
connects with mutual TLS, checking the broker's certificate against `tls_ca` (the fleet
CA's by default); virtual boards are deployed with the CA (`fleetwire deploy --ca`).

The simulated devices are fleetwire.host.fleet.device's, the virtual boards
fleetwire.host.fleet.boards'."""

import asyncio
import random
import resource
import shutil
import tempfile
import threading
import time

from fleetwire.host.fleet.boards import Boards
from fleetwire.host.fleet.device import BAD, CRASH_PER_HOUR, GOOD, Clock, Identities, SimDevice
from fleetwire.host.fleet.lag import Lag, lag_words


class Simulator:
    """Simulator(host, port, devices=200, period_s=60, speed=120, hours=4, seed=1, boards=0)."""

    def __init__(
        self,
        host,
        port,
        devices=200,
        period_s=60,
        speed=1.0,
        hours=None,
        duration=None,
        seed=1,
        rollout=(0.3, 0.7),
        wifi_drops_per_hour=0.3,
        silent_share=0.03,
        progress=None,
        boards=0,
        board_heap="128K",
        board_root=None,
        ca=None,
        tls_ca=None,
        ota=False,
        profiles=None,
        bad=(),
        release_keys=None,
        commands=False,
        only=None,
        identities=None,
    ):
        if boards and speed != 1:
            raise ValueError(
                "virtual boards run on their own clock, in real time: boards need speed 1, not %g" % speed
            )
        self.host, self.port = host, port
        # virtual boards among the devices; board_root keeps their directories (consoles,
        # flash), else they live in a temporary directory removed at the end
        self.n_boards = boards
        self.board_heap = board_heap
        self.ca = ca  # a fleet CA (pki.FleetCA): mutual TLS, an identity per device
        self.tls_ca = tls_ca  # the CA of the broker's certificate (default: the fleet CA)
        self.identities = None
        self.board_root = board_root
        self.boards = None
        self.n = devices  # the fleet's size; device i is sim-<i>, whichever process runs it
        # the devices this process runs (a worker's share: fleetwire.host.fleet.workers); the
        # others' ids, certificates and random draws are theirs, so a device is the same device
        # wherever it runs
        self.only = sorted(only) if only is not None else list(range(devices))
        self.identities_dir = identities  # certificates already issued there (by the workers' parent)
        self.seed = seed
        self.period_s = period_s
        self.clock = Clock(speed)
        self.period_real = period_s / speed
        if duration is None:
            duration = (hours or 1) * 3600 / speed
        self.duration = duration
        self.hours = duration * speed / 3600
        self.rollout = rollout  # (start, end) as fractions of the run; None: no built-in rollout
        self.ota = ota  # devices take releases over MQTT (fleetwire.ota)
        self.commands = commands  # devices take commands ("ping", "period") and desired state ("config")
        self.commands_run = 0  # command messages the devices took
        # the key set each device trusts (ota/keys.json: ReleaseKeys.key_set()), as deployed
        self.release_keys = release_keys
        self.profiles = {v: {"crash_per_hour": r, "boot_crash": 0.0} for v, r in CRASH_PER_HOUR.items()}
        self.profiles.update({v: dict(BAD) for v in bad})
        self.profiles.update(profiles or {})
        self.wifi_drops_per_hour = wifi_drops_per_hour
        self.silent_share = silent_share
        self.progress = progress  # progress(sim) is called every second
        self.rng = random.Random(seed)
        self.sent = self.acked = self.errors = self.publish_fail = 0
        self.records_acked = 0  # telemetry records the broker acknowledged, each counted once
        self.lag = Lag(period_s / speed, speed)  # how far the simulator falls behind its schedule
        self.boots = self.crashes = self.drops = 0
        self.crash_records = 0  # crash records sent (fleet/<id>/crash)
        self.last_error = None
        self.done = None
        self.stopping = False
        self.end = None  # when the run stops (time.monotonic()); stop_after() moves it
        self.started = threading.Event()  # the devices are running
        self.devices = []
        import socket

        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        self.dead_port = s.getsockname()[1]  # bound, never listening: "Wi-Fi down"
        self._dead = s

    def stop_after(self, seconds):
        """End the run `seconds` from now (from any thread): a driver that decides how long."""
        self.end = time.monotonic() + seconds

    def profile(self, version):
        """What `version` does to a device: {"crash_per_hour", "boot_crash"}."""
        return self.profiles.get(version, GOOD)

    def rollout_progress(self):
        a, b = self.rollout
        f = self.clock.hours() / self.hours
        return 0.0 if f < a else 1.0 if f >= b else (f - a) / (b - a)

    def connected(self):
        return sum(1 for d in self.devices if d.client is not None and d.client.is_connected())

    def versions(self):
        """{release: devices running it}."""
        out = {}
        for d in self.devices:
            out[d.fw] = out.get(d.fw, 0) + 1
        return out

    def ids(self):
        """The ids of the devices this process runs."""
        return [device_id(i) for i in self.only]

    async def run(self, start=None):
        """Run the devices -> the summary. `start`, if given, is awaited once everything is ready
        and returns (t0, start_ms): the monotonic time and epoch ms the clock starts from, the
        same for every worker of a fleet."""
        self._start = start
        raise_fd_limit(fd_needed(len(self.only)))
        if self.identities_dir is not None:  # issued by the parent: load this share's
            self.identities = Identities(self.ca, self.identities_dir, self.tls_ca)
            await asyncio.get_running_loop().run_in_executor(None, self.identities.load, self.ids())
            return await self._run_boards()
        if self.ca is None:
            return await self._run_boards()
        keys = tempfile.mkdtemp(prefix="fleetwire-sim-identities-")  # mode 700; the keys go with it
        self.identities = Identities(self.ca, keys, self.tls_ca)
        try:
            await asyncio.get_running_loop().run_in_executor(None, self.identities.issue, self.ids())
            return await self._run_boards()
        finally:
            shutil.rmtree(keys, ignore_errors=True)

    async def _run_boards(self):
        if not self.n_boards:
            return await self._run()
        root = self.board_root or tempfile.mkdtemp(prefix="fleetwire-sim-boards-")
        self.boards = Boards(
            root,
            self.n_boards,
            self.host,
            self.port,
            self.period_s,
            self.board_heap,
            ca=self.ca.dir if self.ca else None,
        )
        try:
            await asyncio.get_running_loop().run_in_executor(None, self.boards.start)
            return await self._run()
        finally:
            self.boards.stop()
            if not self.board_root:
                shutil.rmtree(root, ignore_errors=True)

    async def _run(self):
        self.done = asyncio.Event()
        t0 = start_ms = None
        if self._start is not None:
            t0, start_ms = await self._start()
        self.clock = Clock(self.clock.speed, start_ms, t0)
        # each device draws from its own generator, seeded by the run's seed and its number
        self.devices = [SimDevice(self, i, random.Random("%s/%d" % (self.seed, i))) for i in self.only]
        tasks = [asyncio.ensure_future(d.run()) for d in self.devices]
        if self.end is None:  # stop_after() may have come first
            self.end = self.clock.t0 + self.duration
        self.started.set()
        probe = asyncio.ensure_future(self.lag.probe())
        while time.monotonic() < self.end:
            await asyncio.sleep(min(1.0, max(0.0, self.end - time.monotonic())))
            if self.progress:
                self.progress(self)
        probe.cancel()
        # no new records; let those out be acknowledged; then power everything off
        self.stopping = True
        drain_end = time.monotonic() + 15
        while time.monotonic() < drain_end and self.acked < self.sent:
            await asyncio.sleep(0.2)
        self.done.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._dead.close()
        return self.summary()

    def silent(self):
        """The ids of the devices that have gone silent (the story's), by now."""
        return [
            d.id
            for d in self.devices
            if d.silent_at is not None and d.silent_at * self.hours <= d.clock.hours()
        ]

    def summary(self):
        return {
            "devices": len(self.only),
            "sent": self.sent,
            "acked": self.acked,
            "records_acked": self.records_acked,
            "unacked": self.sent - self.acked,
            "errors": self.errors,
            "publish_fail": self.publish_fail,
            "boots": self.boots,
            "crashes": self.crashes,
            "crash_records": self.crash_records,
            "wifi_drops": self.drops,
            "simulated_hours": round(self.hours, 2),
            "boards": self.boards.ids if self.boards else [],
            "last_error": self.last_error,
            "lag": self.lag.summary(),
        }


def progress_line(sim):
    return (
        "\r  sim %5.2f h | devices up %4d/%d | records sent %7d, acknowledged %7d | "
        "crashes %d, wifi drops %d, errors %d %s"
        % (
            sim.clock.hours(),
            sim.connected(),
            sim.n,
            sim.sent,
            sim.acked,
            sim.crashes,
            sim.drops,
            sim.errors,
            "| + %d virtual boards " % sim.n_boards if sim.n_boards else "",
        )
        + lag_words(sim.lag.summary())
    )


def device_id(i):
    return "sim-%04d" % i


class FdLimitError(RuntimeError):
    """This process may not open a socket for each of its devices."""


def fd_needed(devices):
    """Open files for `devices` devices in one process: a socket each (a Wi-Fi drop closes one
    before the next opens), a tenth more for reconnects overlapping a close, and the process's own."""
    return devices + devices // 10 + 64


def raise_fd_limit(want, what="the simulator"):
    """Raise this process's open-file limit to `want` (its children inherit it) -> the limit;
    FdLimitError if the hard limit is below it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= want:
        return soft
    if hard != resource.RLIM_INFINITY and hard < want:
        raise FdLimitError(
            "%s needs %d open files (a socket per device) and this process may open %d at most (its hard "
            "limit): raise it (nofile in /etc/security/limits.conf, or LimitNOFILE), or spread the devices "
            "over more worker processes (--workers)" % (what, want, hard)
        )
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    return want

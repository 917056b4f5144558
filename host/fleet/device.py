"""A simulated device of the fleet simulator (fleetwire.host.fleet.sim): fleetwire's own
asyncio client, vitals agent and (with updates) fleetwire.ota, in CPython, with stand-ins
for what a board has: its RAM-kept state (RamStates), an update target whose "flash" is RAM
(SimTarget), a clock that can run faster than real time (Clock), the board itself (SimBoard:
reset cause, heap, battery, Wi-Fi) and each device's TLS identity (Identities). What a
release does to a device (its crash rates) is the simulation's: RELEASES, GOOD, BAD."""

import asyncio
import json
import ssl
import time

from fleetwire.aio import AsyncClient
from fleetwire.ramstore import RamBlocks
from fleetwire.ring.store import RingStore
from fleetwire.cmd import Commands
from fleetwire.desired import State
from fleetwire.vitals import RamState, Vitals

RELEASES = ("1.4.2", "1.5.0")  # the fleet starts on the first; the rollout brings the second
CRASH_PER_HOUR = {"1.4.2": 0.02, "1.5.0": 0.25}
GOOD = {"crash_per_hour": 0.02, "boot_crash": 0.0}  # a release nobody made bad
# crashes more, some boots crash at once, and most of its crashes are one of its own (NEW_CRASH)
BAD = {"crash_per_hour": 1.2, "boot_crash": 0.15, "new_crash": 0.8}  # a gate over a few device-hours sees it
CAUSES = ("panic", "panic", "watchdog", "brownout")
# What a simulated app dies of when it panics (type, message, function, file): every release's,
# and the one a bad release adds. Each is a crash record as fleetwire.crashsend sends it after
# the reboot, on fleet/<id>/crash; watchdog and brownout resets are records without one.
CRASHES = (
    ("KeyError", "'calibration'", "read", "sensor.py"),
    ("OSError", "[Errno 113] EHOSTUNREACH", "send", "uplink.py"),
    ("MemoryError", "memory allocation failed, allocating 4096 bytes", "pack", "batch.py"),
)
NEW_CRASH = ("ZeroDivisionError", "divide by zero", "average", "app.py")


class RamStates:
    """fleetwire.ota's records (boot state, download) in RAM: a device's "flash"."""

    def __init__(self):
        self.d = {}

    def load(self, key):
        import copy

        v = self.d.get(key)
        return copy.deepcopy(v) if v is not None else None

    def save(self, key, v):
        import copy

        self.d[key] = copy.deepcopy(v)

    def remove(self, key):
        self.d.pop(key, None)


class SimTarget:
    """Where a simulated device's download goes: RAM. Switching to it is a reboot into the
    release (the simulation decides what the release does)."""

    kind = "app"
    LIMIT = 4 * 1024 * 1024

    def __init__(self):
        self.data = None

    def fits(self, m):
        if m["size"] > self.LIMIT:
            from fleetwire.ota.ops import Refused

            raise Refused("space", m["version"], m["size"], "the simulated flash", self.LIMIT)

    def open(self, resume):
        if not resume or self.data is None:
            self.data = bytearray()
        return len(self.data)

    def write(self, buf, off, n, at):
        self.data += memoryview(buf)[off : off + n]

    def close(self):
        pass

    def reader(self):
        import io

        return io.BytesIO(bytes(self.data or b""))

    def discard(self):
        self.data = None

    def apply(self, m, st, buf, save):
        st["prev"] = {"kind": "app", "app": None, "version": st.get("version"), "sha": st.get("sha")}
        st["version"], st["sha"] = m["version"], m["sha256"]
        st["trial"] = {"kind": "app", "version": m["version"], "sha": m["sha256"], "boots": 0}
        st["last"] = None
        save()

    def revert(self, st, save):
        p = st.get("prev") or {}
        st["version"], st["sha"], st["prev"] = p.get("version"), p.get("sha"), None
        save()


class SimState(State):
    """fleetwire.desired on a simulated device: the applied document in the device's RAM (it
    survives reboots, as state.json on a board's flash does), the report through its
    AsyncClient (QoS 1, retained). Its "config" section's period_s sets the vitals period."""

    def __init__(self, dev):
        self.dev = dev
        State.__init__(self, dev.id, self._publish, path="")  # no file: RAM below
        self.doc = json.loads(dev.state_doc)
        self.on("config", self._config)
        self.due = True  # say what it holds, once connected

    def _config(self, v):
        if v and "period_s" in v:
            self.dev.vitals.period_s = int(v["period_s"])

    def save(self):
        self.dev.state_doc = json.dumps(self.doc)

    def _publish(self, topic, payload):
        asyncio.get_event_loop().create_task(self.dev.client.publish(topic, payload.encode(), True, 1, False))


class SimCommands(Commands):
    """fleetwire.cmd on a simulated device: the journal in the device's RAM (it survives the
    device's reboots, as the file on a board's flash does), the answers through its AsyncClient.
    Handlers: "ping" (-> the release the device runs) and "period" (args {"period_s"}: the
    vitals period)."""

    def __init__(self, dev):
        self.dev = dev
        self._n = 0
        Commands.__init__(self, dev.id, self._publish, journal="")  # no file: RAM below
        self.j, self.d = (list(x) for x in dev.journal)
        self.on("ping", lambda args: dev.fw)
        self.on("period", self._period)

    def _period(self, args):
        self.dev.vitals.period_s = int(args["period_s"])
        return self.dev.vitals.period_s

    def save(self):
        self.dev.journal = ([list(e) for e in self.j], list(self.d))

    def _publish(self, topic, payload):
        # the pid comes once the client took it: a stand-in id until then (negative)
        self._n -= 1
        key = self._n
        c = self.dev.client

        async def go():
            pid = await c.publish(topic, payload.encode(), qos=1, wait=False)
            if key in self.out:
                self.out[pid] = self.out.pop(key)

        asyncio.get_running_loop().create_task(go())
        return key


class Clock:
    """Simulated epoch ms: starts at `start_ms` and runs `speed` times faster than real time."""

    def __init__(self, speed=1.0, start_ms=None, t0=None):
        self.speed = speed
        # t0: CLOCK_MONOTONIC is the machine's, so the workers of a fleet share one start
        self.t0 = time.monotonic() if t0 is None else t0
        self.start_ms = start_ms if start_ms is not None else int(time.time() * 1000)

    def now_ms(self):
        return self.start_ms + int((time.monotonic() - self.t0) * 1000 * self.speed)

    def hours(self):
        return (time.monotonic() - self.t0) * self.speed / 3600


class SimBoard:
    """fleetwire.board for one simulated device (the vitals agent asks this)."""

    def __init__(self, dev):
        self.dev = dev
        self._min = None

    def heap_free(self):
        d = self.dev
        h = (d.clock.now_ms() - d.boot_ms) / 3600000
        free = int(d.heap0 - d.leak_per_hour * h + d.rng.randrange(-400, 400))
        free = max(free, 2000)
        self._min = free if self._min is None else min(self._min, free)
        return free

    def heap_min(self):
        return self._min if self._min is not None else self.heap_free()

    def rssi(self):
        d = self.dev
        return None if d.offline else int(d.rssi0 + d.rng.gauss(0, 3))

    def vbat_mv(self):
        d = self.dev
        if d.vbat0 is None:
            return None
        return max(3000, int(d.vbat0 - d.drain_per_hour * d.clock.hours()))

    def uptime_ms(self):
        return self.dev.clock.now_ms() - self.dev.boot_ms

    def epoch_ms(self):
        return self.dev.clock.now_ms()

    def reset_cause(self):
        return self.dev.cause

    def reset(self):
        pass  # the simulator restarts the device itself


class Identities:
    """Each simulated device's TLS context: a key and certificate issued by the fleet CA for
    its id, in files under `root` (CPython's ssl loads a certificate only from a file)."""

    def __init__(self, ca, root, tls_ca=None):
        self.ca = ca
        self.root = root
        self.tls_ca = tls_ca or ca.cert_path
        self._ctx = {}

    def issue(self, ids, contexts=True):
        """Issue every id its certificate (recorded in the CA's index in one go); contexts=False
        only writes the files, for other processes to load()."""
        from fleetwire.host.identity import pki

        made = []
        for device_id in ids:
            issued = self.ca.issue(device_id, "device", days=2, record=False)
            cert, key = pki.write_credentials(issued, self.root)
            made.append(issued)
            if not contexts:
                continue
            ctx = ssl.create_default_context(cafile=self.tls_ca)
            ctx.load_cert_chain(cert, key)
            self._ctx[device_id] = ctx
        self.ca.record(*made)

    def load(self, ids):
        """The contexts of certificates already issued under `root` (ROOT/<id>.pem, .key)."""
        import os

        for device_id in ids:
            base = os.path.join(self.root, device_id)
            ctx = ssl.create_default_context(cafile=self.tls_ca)
            ctx.load_cert_chain(base + ".pem", base + ".key")
            self._ctx[device_id] = ctx

    def context(self, device_id):
        return self._ctx[device_id]


class SimDevice:
    def __init__(self, sim, n, rng):
        self.sim = sim
        self.clock = sim.clock
        self.rng = rng
        self.id = "sim-%04d" % n  # fleetwire.host.fleet.sim.device_id
        self.base = RELEASES[0]  # the release the device was deployed with
        self.fw = self.base
        self.rank = rng.random()  # place in the rollout order
        self.flash = RamBlocks(8, 2048)  # the "mqtt" partition: survives reboots
        self.state = RamState()  # the vitals state file
        self.rssi0 = rng.uniform(-85, -45)
        self.vbat0 = None if rng.random() < 0.3 else rng.uniform(3900, 4150)
        self.drain_per_hour = rng.uniform(2, 40)
        self.leak_per_hour = rng.choice([0, 0, 0, 0, rng.uniform(300, 3000)])
        self.heap0 = rng.randrange(90000, 120000)
        self.silent_at = rng.uniform(0.2, 0.9) if rng.random() < sim.silent_share else None
        self.cause = "power_on"
        self.boot_ms = self.clock.now_ms()
        self.offline = False
        self.client = None
        self.vitals = None
        self.ota_states = RamStates()  # fleetwire.ota's records: survive reboots
        if sim.release_keys:
            self.ota_states.save("keys", sim.release_keys)  # as deployed
        self.ota_target = SimTarget()
        self.updater = None
        self.journal = ([], [])  # fleetwire.cmd's journal: survives reboots
        self.cmds = None
        self.state_doc = '{"version": 0, "state": {}}'  # fleetwire.desired's state.json
        self.desired = None
        self.subscribed = False
        self._ota_restart = False
        self._tell = False
        self.crash_id = 0
        self.crash_records = []  # kept on "flash" until sent after a reboot
        # the simulation's own tally of telemetry records the broker acknowledged, each once:
        # packet id -> seq of those in flight (a record sent again after a reboot keeps its id),
        # every seq up to ack_floor acknowledged, and those above it
        self._pid_seq = {}
        self.ack_floor = None
        self.ack_above = set()

    def profile(self):
        return self.sim.profile(self.fw)

    async def run(self):
        await asyncio.sleep(self.rng.random() * min(2.0, self.sim.period_real))  # no stampede
        while not self.sim.done.is_set():
            try:
                reason = await self._boot_and_live()
            except Exception as e:  # a device's trouble is counted, never the fleet's end
                self.sim.errors += 1
                self.sim.last_error = "%s: %s: %s" % (self.id, type(e).__name__, e)
                reason = "error"
                await asyncio.sleep(self.sim.period_real)
            await self._power_off()
            if reason in ("stop", "silent"):
                return

    async def _boot_and_live(self):
        sim = self.sim
        self.boot_ms = self.clock.now_ms()
        self.board = SimBoard(self)
        trial = None
        if sim.ota:
            # what main.py's bootstrap does at a board's boot: the trial moves on, or ends in a rollback
            from fleetwire import otaboot

            st = self.ota_states.load("boot") or {}
            if otaboot.advance(st):
                self.ota_states.save("boot", st)
            self.fw = st.get("version") or self.base
            trial = st.get("trial")
        # backoff in simulated time: 1 s doubling to 128 s, as on a board
        c = AsyncClient(
            self.id,
            sim.host,
            sim.port,
            keepalive=30,
            reconnect=True,
            ssl=sim.identities.context(self.id) if sim.identities else None,
            backoff_min=max(0.01, 1 / sim.clock.speed),
            backoff_max=min(2, max(0.05, 128 / sim.clock.speed)),
            timeout=10,
            queue_size=16,
            store=RingStore(self.flash),
        )
        self.client = c
        v = Vitals(None, self.id, self.fw, sim.period_s, state=self.state, board=self.board)
        v.c = c
        c.on_connect = lambda present: v.connected()
        c.on_delivered = self._delivered
        self.vitals = v
        v.boot()
        if trial and self.rng.random() < self.profile()["boot_crash"]:
            # this release crashes at once on this device: before it ever connects
            await asyncio.sleep(self.rng.uniform(0.1, 0.5) * sim.period_real)
            self.cause = self.rng.choice(CAUSES)
            self._crashed()
            sim.crashes += 1
            return "crash"
        if sim.commands:  # before connect: the commands that waited come right after CONNACK
            self.cmds = SimCommands(self)
            self.desired = SimState(self)
            c.set_callback(self._message)
        await c.connect(clean_session=False)
        sim.boots += 1
        await self._send_crashes()
        if sim.commands:
            await c.subscribe(self.cmds.t_run, 1)
            await c.subscribe(self.desired.t_des, 1)
            self.cmds.step()  # answers of the last boot not acknowledged
            self.desired.step()
            self.subscribed = True  # from now on its commands wait in its session
        if sim.ota:
            await self._updates(c, v)
        due = time.monotonic()  # when the next record is due, on the real clock
        while not sim.done.is_set():
            if sim.stopping:  # the run is over: no new records, let the last ones go out
                await asyncio.sleep(0.1)
                continue
            if self.silent_at is not None and self.clock.hours() >= self.silent_at * sim.hours:
                return "silent"
            due = sim.lag.keep(due, time.monotonic())  # late? by how much; periods it could not make
            await self._publish()
            # the schedule is absolute: a slow publish does not stretch the period
            due += sim.period_real * self.rng.uniform(0.97, 1.03)
            t_end = due
            if self.updater is None:
                await asyncio.sleep(max(0.0, t_end - time.monotonic()))
            while self.updater is not None and time.monotonic() < t_end and not sim.done.is_set():
                await asyncio.sleep(min(0.2, max(0.0, t_end - time.monotonic())))
                if self.updater is not None:
                    self.updater.step()
                    if self._tell:  # the updater wants its state out now
                        self._tell = False
                        await self._publish()
                    if self._ota_restart:  # switched: a deliberate restart into the release
                        self._ota_restart = False
                        self.cause = "deliberate"
                        self.state.d["deliberate"] = True
                        return "ota"
            event = self._event()
            if event:
                return event
        return "stop"

    async def _updates(self, c, v):
        """fleetwire.ota on this device: the offers, the chunks, the trial."""
        from fleetwire.ota.agent import Updater

        loop = asyncio.get_running_loop()

        def send(topic, payload):
            loop.create_task(c.publish(topic, bytes(payload), qos=0, wait=False))

        def restart():
            self._ota_restart = True

        def tell():
            self._tell = True

        # max_packet: the client's (AsyncClient's default), or chunks would not fit it
        u = Updater(
            self.id,
            send,
            v,
            max_packet=1024,
            window=8,
            confirm_s=max(5.0, 600 / self.sim.clock.speed),
            kind="esp32",
            restart=restart,
            report=tell,
            targets={"app": self.ota_target, "firmware": self.ota_target},
            running=self.base,
            states=self.ota_states,
        )
        u.log = _quiet
        self.updater = u
        part = []  # a signed message longer than the client's max_packet comes in pieces

        def on_msg(topic, msg):
            part.append(bytes(msg))
            if not c.rest:
                u.handle(topic, b"".join(part))
                part.clear()

        self._ota_msg = on_msg
        c.set_callback(self._message)
        await c.subscribe(u.t_all, 1)

    def _crashed(self):
        """The record of the crash that ends this boot (self.cause), as crashsend keeps it."""
        rng, v = self.rng, self.vitals
        self.crash_id += 1
        rec = {
            "crash_id": self.crash_id,
            "boot_id": v._st["boot_id"],
            "uptime_s": max(0, (self.clock.now_ms() - self.boot_ms) // 1000),
            "heap_free": self.board.heap_free(),
            "heap_largest": None,
            "kind": "exception",
            "fw_version": self.fw,
            "type": None,
            "message": None,
            "traceback": None,
            "log": [],
            "device_id": self.id,
            "ts": self.clock.now_ms(),
        }
        if self.cause != "panic":  # a reset without an exception: its kind only
            rec["kind"] = self.cause
        else:
            typ, msg, fn, f = (
                NEW_CRASH if rng.random() < self.profile().get("new_crash", 0) else rng.choice(CRASHES)
            )
            rec.update(
                type=typ,
                message=msg,
                # as a board's -O3 .mpy prints it: line 1 of every frame
                traceback='Traceback (most recent call last):\n  File "runner.py", line 1, in main\n'
                '  File "app.py", line 1, in step\n  File "%s", line 1, in %s\n%s: %s\n' % (f, fn, typ, msg),
                log=["step %d" % (v._st.get("seq", 0)), "%s()" % fn],
            )
        if len(self.crash_records) < 4:  # crashsend.KEEP
            self.crash_records.append(rec)

    async def _send_crashes(self):
        """The records the last boots left, once connected: QoS 1 into the client's store."""
        while self.crash_records:
            rec = self.crash_records[0]
            try:
                await self.client.publish(
                    "fleet/%s/crash" % self.id, json.dumps(rec).encode(), qos=1, wait=False
                )
            except Exception as e:  # the next boot sends it
                self.sim.last_error = "%s: crash record: %s: %s" % (self.id, type(e).__name__, e)
                return
            self.crash_records.pop(0)
            self.sim.crash_records += 1

    _ota_msg = None

    def _message(self, topic, msg):
        if self.cmds is not None and self.cmds.handle(topic, msg):
            self.sim.commands_run += 1
        elif self.desired is not None and self.desired.handle(topic, msg):
            self.desired.step()
        elif self._ota_msg is not None:
            self._ota_msg(topic, msg)

    async def _publish(self):
        sim, v, c = self.sim, self.vitals, self.client
        rec = bytes(v.make())
        try:
            v._pid = await c.publish(v.topic, rec, qos=1, wait=False)
            v._t_pub = time.monotonic()
            self._pid_seq[v._pid] = v._st["seq"]
            sim.sent += 1
        except Exception as e:
            v.failed()
            sim.publish_fail += 1
            sim.last_error = "%s: publish: %s: %s" % (self.id, type(e).__name__, e)

    def _delivered(self, pid):
        if self.cmds is not None:
            self.cmds.delivered(pid)
        v = self.vitals
        self.sim.acked += 1
        seq = self._pid_seq.pop(pid, None)
        if seq is not None:
            self._record_acked(seq)
        if pid == v._pid:
            # a round trip on the real clock is no latency of a device living in compressed time:
            # there the record's publish_latency_ms stays null, so that no table or report shows one
            if self.clock.speed == 1:
                v.latency_ms = int((time.monotonic() - v._t_pub) * 1000)
            v.acked += 1

    def _record_acked(self, seq):
        if self.ack_floor is None:
            self.ack_floor = seq - 1
        if seq <= self.ack_floor or seq in self.ack_above:
            return  # acknowledged again: sent again from the store after a reboot
        self.ack_above.add(seq)
        while self.ack_floor + 1 in self.ack_above:
            self.ack_floor += 1
            self.ack_above.discard(self.ack_floor)
        self.sim.records_acked += 1

    def _event(self):
        """What happens to the device in this period -> a reason to reboot, or None."""
        sim, rng = self.sim, self.rng
        per_h = sim.period_s / 3600
        if sim.rollout and self.fw != RELEASES[-1] and sim.rollout_progress() > self.rank:
            self.fw = RELEASES[-1]
            self.cause = "deliberate"  # the OTA update restarts the board on purpose
            self.state.d["deliberate"] = True
            return "ota"
        if rng.random() < self.profile()["crash_per_hour"] * per_h:
            self.cause = rng.choice(CAUSES)
            self._crashed()
            sim.crashes += 1
            return "crash"
        if not self.offline and rng.random() < sim.wifi_drops_per_hour * per_h:
            asyncio.ensure_future(self._wifi_drop(rng.uniform(2, 20) * 60 / sim.clock.speed))
        self.cause = "power_on"
        return None

    async def _wifi_drop(self, seconds):
        """The access point goes away for `seconds` (real): connecting fails meanwhile."""
        c = self.client
        self.offline = True
        self.sim.drops += 1
        port = c.port
        c.port = self.sim.dead_port
        if c._w is not None:
            # what the network stack reports when the access point vanishes (not a
            # close by the broker: that would look like a clash of client ids)
            await c._shutdown(OSError(113, "EHOSTUNREACH: Wi-Fi down"))
        await asyncio.sleep(seconds)
        c.port = port
        self.offline = False

    async def _power_off(self):
        c = self.client
        if c is not None:
            c.reconnect = False
            c._closing = True
            if c._retry_task is not None:
                c._retry_task.cancel()
            await c._shutdown(None)  # no DISCONNECT: the power just goes
        self.client = None
        self.updater = None


def _quiet(*a):
    pass

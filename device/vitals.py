# The vitals agent: one JSON record every period to fleet/<device_id>/telemetry at
# QoS 1, the record that `fleetwire report` turns into fleet health. The record is
# formatted into one preallocated buffer (no allocation per record on a 64-bit port);
# the lifetime counters, boot id and sequence live in a small state file on flash.
try:
    from time import ticks_ms, ticks_diff
except ImportError:
    from .cpython import ticks_ms, ticks_diff

import json

# Keys in the order of the record (the report's schema, less the collector's rx_ts).
_KEYS = (
    b'{"device_id":',
    b',"fw_version":',
    b',"boot_id":',
    b',"ts":',
    b',"seq":',
    b',"uptime_s":',
    b',"heap_free":',
    b',"heap_min":',
    b',"rssi":',
    b',"vbat_mv":',
    b',"reconnects":',
    b',"publish_fail":',
    b',"queue_drops":',
    b',"queue_depth":',
    b',"store_used":',
    b',"publish_latency_ms":',
    b',"reset_cause":',
    b',"period_s":',
)
_NULL = b"null"
_CAUSES = ("power_on", "deliberate", "watchdog", "panic", "brownout")


def copy(buf, i, b):
    # byte by byte: a slice assignment would allocate a slice object
    for k in range(len(b)):
        buf[i + k] = b[k]
    return i + len(b)


def num(buf, i, n):
    if n is None:
        return copy(buf, i, _NULL)
    if n < 0:
        buf[i] = 45  # "-"
        i += 1
        n = -n
    k, t = 1, n // 10
    while t:
        k += 1
        t //= 10
    j = i + k
    while k:
        k -= 1
        buf[i + k] = 48 + n % 10
        n //= 10
    return j


class FileState:
    """The agent's few numbers in a JSON file, replaced atomically (write, rename)."""

    def __init__(self, path="vitals.json"):
        self.path = path

    def load(self):
        try:
            with open(self.path) as f:
                return json.load(f)
        except (OSError, ValueError):
            return {}

    def save(self, d):
        import os

        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(d, f)
        os.rename(tmp, self.path)


class RamState:
    """State kept in RAM: for simulated devices (the object outlives their 'reboots')."""

    def __init__(self):
        self.d = {}

    def load(self):
        return dict(self.d)

    def save(self, d):
        self.d = dict(d)


class Vitals:
    """Vitals(client, device_id, fw_version, period_s=60, state="vitals.json").

    Call boot() once after power-up, then step() from the main loop (or publish()
    whenever you like). deliberate_reset() marks the reset in flash and restarts, so
    the next boot reports reset_cause "deliberate" rather than a crash.
    `board` is fleetwire.board unless given (the host passes an emulation)."""

    def __init__(
        self,
        client,
        device_id,
        fw_version,
        period_s=60,
        state="vitals.json",
        board=None,
        topic=None,
        size=512,
    ):
        if board is None:
            from . import board
        self.c = client
        self.board = board
        self.device_id = device_id
        self.topic = topic or ("fleet/%s/telemetry" % device_id).encode()
        self.period_s = int(period_s)
        self.state = FileState(state) if isinstance(state, str) else state
        self._buf = bytearray(size)
        self._mv = memoryview(self._buf)
        self._id = json.dumps(device_id).encode()
        self._fw = json.dumps(fw_version).encode()
        self._causes = tuple(json.dumps(c).encode() for c in _CAUSES)
        self._st = {}
        self._cause = None
        self._next = ticks_ms()
        self._pid = 0
        self._t_pub = 0
        self._ups = 0
        self._drops_seen = 0
        self.latency_ms = None
        self.acked = 0  # records of this boot the broker acknowledged
        self.ota = None  # fleetwire.ota's Updater: its state rides in every record
        if client is not None:
            self._chain(client)

    # ---- life

    def boot(self):
        """A new boot: boot_id + 1, and why we started (a deliberate mark wins)."""
        st = self.state.load()
        for k in ("boot_id", "seq", "reconnects", "publish_fail", "queue_drops"):
            st.setdefault(k, 0)
        st["boot_id"] += 1
        cause = "deliberate" if st.pop("deliberate", False) else self.board.reset_cause()
        self._cause = cause if cause in _CAUSES else "panic"
        self._st = st
        self.state.save(st)
        return st["boot_id"]

    def deliberate_reset(self):
        """Mark the coming reset as intended, then reset the board."""
        self._st["deliberate"] = True
        self.state.save(self._st)
        self.board.reset()

    def room(self, size):
        """Make the record buffer at least `size` bytes (the ota member needs more)."""
        if len(self._buf) < size:
            self._buf = bytearray(size)
            self._mv = memoryview(self._buf)

    def every(self, period_s):
        """A new period (remote config): the next record comes period_s from now."""
        self.period_s = int(period_s)
        self._next = ticks_ms() + self.period_s * 1000

    def due(self):
        return ticks_diff(ticks_ms(), self._next) >= 0

    def step(self):
        """Publish a record if one is due -> True if one went out."""
        if not self.due():
            return False
        self._next = ticks_ms() + self.period_s * 1000
        self.publish()
        return True

    def publish(self):
        """Make a record and hand it to the client (QoS 1, not blocking) -> packet id, or 0."""
        rec = self.make()
        try:
            self._pid = self.c.publish(self.topic, rec, False, 1, block=False)
        except Exception as e:
            # the classes load with the first failure, not the first record: a board near its
            # heap's end must not fail to publish for want of them (a reset loop seen so)
            from .errors import QueueFull
            from .store import StoreFull

            if not isinstance(e, (QueueFull, StoreFull)):
                raise
            self.failed()
            return 0
        self._t_pub = ticks_ms()
        return self._pid

    def failed(self):
        """A record could not be published (counted in publish_fail)."""
        self._st["publish_fail"] += 1

    def connected(self):
        """A connection came up: every one after the first of a boot is a reconnect."""
        self._ups += 1
        if self._ups > 1:
            self._st["reconnects"] += 1

    # ---- the record

    def make(self):
        """The next record, formatted -> memoryview into the agent's buffer (valid
        until the next call). The sequence number is saved before it is used, so a
        reset never reuses one."""
        st = self._st
        st["seq"] += 1
        c = self.c
        if c is not None:
            d = c.dropped
            if d > self._drops_seen:
                st["queue_drops"] += d - self._drops_seen
                self._drops_seen = d
        self.state.save(st)
        return self._mv[: self.format()]

    def format(self):
        """Format the record for the current sequence number into the buffer ->
        its length. Allocates nothing (on a 64-bit port; on a 32-bit board the
        epoch in ms is a big number)."""
        st = self._st
        c = self.c
        b = self.board
        free = b.heap_free()
        low = b.heap_min()
        depth = c.pending if c is not None else 0
        store = getattr(c, "store", None)
        buf = self._buf
        K = _KEYS
        i = copy(buf, 0, K[0])
        i = copy(buf, i, self._id)
        i = copy(buf, i, K[1])
        i = copy(buf, i, self._fw)
        i = copy(buf, i, K[2])
        i = num(buf, i, st["boot_id"])
        i = copy(buf, i, K[3])
        i = num(buf, i, b.epoch_ms())
        i = copy(buf, i, K[4])
        i = num(buf, i, st["seq"])
        i = copy(buf, i, K[5])
        i = num(buf, i, b.uptime_ms() // 1000)
        i = copy(buf, i, K[6])
        i = num(buf, i, free)
        i = copy(buf, i, K[7])
        i = num(buf, i, low)
        i = copy(buf, i, K[8])
        i = num(buf, i, b.rssi())
        i = copy(buf, i, K[9])
        i = num(buf, i, b.vbat_mv())
        i = copy(buf, i, K[10])
        i = num(buf, i, st["reconnects"])
        i = copy(buf, i, K[11])
        i = num(buf, i, st["publish_fail"])
        i = copy(buf, i, K[12])
        i = num(buf, i, st["queue_drops"])
        i = copy(buf, i, K[13])
        i = num(buf, i, depth)
        i = copy(buf, i, K[14])
        i = num(buf, i, store.backlog if store is not None else 0)
        i = copy(buf, i, K[15])
        i = num(buf, i, self.latency_ms)
        i = copy(buf, i, K[16])
        if self._cause is not None:  # only on the first record after a boot
            i = copy(buf, i, self._causes[_CAUSES.index(self._cause)])
            self._cause = None
        else:
            i = copy(buf, i, _NULL)
        i = copy(buf, i, K[17])
        i = num(buf, i, self.period_s)
        if self.ota is not None:
            i = self.ota.fmt(buf, i)
        buf[i] = 125  # "}"
        return i + 1

    # ---- client events (chained: the application's own callbacks still run)

    def _chain(self, c):
        if c.is_connected():
            self._ups = 1  # the first connection of this boot is already up
        prev_conn = c.on_connect
        prev_deliv = c.on_delivered

        def on_connect(present):
            self.connected()
            if prev_conn:
                prev_conn(present)

        def on_delivered(pid):
            if pid == self._pid:
                self.latency_ms = ticks_diff(ticks_ms(), self._t_pub)
                self.acked += 1
            if prev_deliv:
                prev_deliv(pid)

        c.on_connect = on_connect
        c.on_delivered = on_delivered

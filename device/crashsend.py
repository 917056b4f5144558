# After a boot: the crash record fleetwire.crash kept in RTC memory goes to flash, and from
# there to the broker, once. Loaded by fleetwire.runner at boot (with fleetwire.crash).
#
# Theory of operation (the record's layout is in crash.py).
#   keep() at boot: a record in RTC memory whose sum checks is written to flash as
#   <dir>/<boot>.<crash id> (to a temporary file, then renamed: a power cut leaves no file
#   or the whole one, and a second move of the same record after a soft reset lands on the
#   same name), then RTC memory is marked moved ("F" stays, "C" goes: the crash ids go on
#   from it). Without one, a reset the board did not choose (power on, watchdog, panic,
#   brownout: vitals' reset_cause) is recorded with its cause and no traceback.
#   Sender publishes the oldest file on fleet/<device>/crash at QoS 1, the record's bytes as
#   they are (the collector decodes them: no decoder, no JSON on the board), and removes it when
#   the broker acknowledged it; a reset or a lost link before that sends it again (the
#   session's store resends the first copy too). So a record can land twice, never zero
#   times; the collector keeps one per key (device_id, boot_id, crash_id).
#   At most KEEP records wait on flash; past that, new ones are dropped (the first of a run
#   of crashes is the one that explains it).
import gc
import os
import sys

from . import MQTTException, crash

try:
    from time import ticks_ms
except ImportError:
    from .cpython import ticks_ms

CAUSES = ("exception", "power_on", "watchdog", "panic", "brownout")  # the record's kind
KEEP = 4


def ok(b):
    """Whether b is a record: "FC", its sum, its offsets in order (the host decodes it:
    fleetwire.host.fleet.crashrec)."""
    if len(b) < 32 or b[0] != 70 or b[1] != 67:
        return False
    c = bytearray(b)
    c[6] = c[7] = 0
    r, m, t = b[28] | b[29] << 8, b[30] | b[31] << 8, b[4] | b[5] << 8
    return sum16(c) == b[6] | b[7] << 8 and 32 <= r <= m <= t <= len(b) - b[25] * b[26]


def sum16(b):
    """Fletcher-16 of b (crash.catch() computes it in line; crashrec.sum16 on the host)."""
    x = y = 0
    for i in range(len(b)):
        x = (x + b[i]) % 255
        y = (y + x) % 255
    return y << 8 | x


def _put(b, i, v, n):
    for k in range(n):
        b[i + k] = v & 255
        v >>= 8


def install(w, release="", boot=0, lines=8, width=64, size=1024):
    # crash.install(): the record, the stream's window and the keeper, all allocated now
    if not 256 <= size <= 2048 or not 0 < lines < 256 or not 0 < width < 256 or lines * width > size // 2:
        raise ValueError("crash record: 256..2048 bytes, its log ring half of it at most")
    b = bytearray(size)
    r = release.encode()[:64]
    b[0] = 70
    _put(b, 2, ticks_ms() & 0x7FFF, 2)  # keep() goes on from the last record's id instead
    _put(b, 8, boot, 4)
    b[25] = lines
    b[26] = width
    _put(b, 28, 32 + len(r), 2)
    b[32 : 32 + len(r)] = r
    w.i = w.s = w.e = 0  # every attribute now: a first store at the crash would allocate
    try:
        import machine

        w.r = machine.RTC()
    except (ImportError, AttributeError):  # the unix port's machine has no RTC
        w.r = None
    if not hasattr(w.r, "memory"):  # no RTC memory: a file
        from .crashfile import F

        w.r = F()
    try:  # (ESP32) an exception made with the heap full keeps 2 frames and its message
        from micropython import alloc_emergency_exception_buf

        alloc_emergency_exception_buf(100)
    except ImportError:  # the unix port has none
        pass
    if "asyncio" in sys.modules:  # a task that ends with an exception nobody awaits
        from .crashrun import end

        sys.modules["asyncio"].get_event_loop().set_exception_handler(end)
    w.t = b


def fit(b, room):
    """The record to send, at most `room` bytes: without the free bytes between the traceback
    and the log ring, and with the traceback's head cut ("..." then its end, where it failed)
    when the client's max_packet leaves less room. The sum is made anew."""
    ring = len(b) - b[25] * b[26]
    m, t = b[30] | b[31] << 8, b[4] | b[5] << 8
    over = t + len(b) - ring - room
    tb = bytes(b[m:t])
    if over > 0:
        tb = b"..." + tb[min(over + 3, len(tb)) :]
    r = bytearray(b[:m]) + tb + b[ring:]
    _put(r, 4, m + len(tb), 2)
    _put(r, 6, 0, 2)
    _put(r, 6, sum16(r), 2)
    return r


def _files(d, t=False):
    # the records waiting, oldest first (a boot's, then its crash ids); t: the ".t" files a
    # power cut left half-written instead
    try:
        fs = os.listdir(d)
    except OSError:
        return []
    if t:
        return [f for f in fs if f.endswith(".t")]
    return sorted((f for f in fs if not f.endswith(".t")), key=lambda f: [int(x) for x in f.split(".")])


def _write(d, b):
    # <d>/<boot>.<id>, whole or not at all
    p = "%s/%d.%d" % (d, b[8] | b[9] << 8 | b[10] << 16 | b[11] << 24, b[2] | b[3] << 8)
    try:
        os.mkdir(d)
    except OSError:
        pass
    for f in _files(d, True):
        os.remove(d + "/" + f)
    if len(_files(d)) >= KEEP:
        try:
            os.stat(p)
        except OSError:
            return None
    with open(p + ".t", "wb") as f:
        f.write(b)
    os.rename(p + ".t", p)
    return p


def keep(cause=None, boot=0, d="crash"):
    """At boot, once crash.install() ran: move the last record from RTC memory to flash, or
    record a reset the board did not choose (`cause`, from vitals; boot: this boot's id)
    -> the kind of the record written ("exception" or the cause), or None."""
    w = crash._w
    b = w.t
    m = w.r.memory()
    if len(m) > 4 and m[0] == 70:  # crash ids go on from the last record's, even a moved one's
        b[2], b[3] = m[2], m[3]
    if ok(m):
        _write(d, m)
        m = bytearray(m)
        m[1] = 0  # moved: the crash id stays for the next record to go on from
        w.r.memory(m)
        return "exception" if m[24] == 0 else CAUSES[m[24]]
    if cause in CAUSES[1:]:
        # a record of its own: no message, no traceback, no log (they were not its boot's)
        _put(b, 2, (b[2] | b[3] << 8) + 1 & 0xFFFF, 2)
        r = bytearray(b)
        r[1] = 67
        _put(r, 8, boot - 1 if boot else 0, 4)  # the boot that ended
        _put(r, 12, 0, 4)
        _put(r, 16, gc.mem_free() if hasattr(gc, "mem_free") else 0, 4)
        r[24] = CAUSES.index(cause)
        r[4], r[5], r[30], r[31] = r[28], r[29], r[28], r[29]
        _put(r, 6, 0, 2)
        _put(r, 6, sum16(r), 2)
        _write(d, r)
        return cause
    return None


class Sender:
    """Sender(client, device_id, d="crash"): call step() from the main loop; each record on
    flash is published once, and removed when acknowledged. .left: records still to send."""

    def __init__(self, client, device_id, d="crash"):
        self.c = client
        self.id = device_id
        self.d = d
        self.pid = 0
        self.f = None
        self.left = len(_files(d))
        prev = client.on_delivered

        def on_delivered(pid):
            if pid == self.pid and self.f:
                try:
                    os.remove(self.f)
                except OSError:
                    pass
                self.pid = 0
                self.f = None
                self.left -= 1
            if prev:
                prev(pid)

        client.on_delivered = self.cb = on_delivered
        self.prev = prev

    def close(self):
        """All sent -> None: on_delivered back as it was (unless chained on since), and this
        module dropped, so a board holds none of it once its records are out."""
        if self.c.on_delivered is self.cb:
            self.c.on_delivered = self.prev
        sys.modules.pop(__name__, None)
        p, _, n = __name__.rpartition(".")
        if p in sys.modules and hasattr(sys.modules[p], n):
            delattr(sys.modules[p], n)

    def step(self):
        """Publish the next record if none is in flight -> True when one went out."""
        if self.pid or not self.left:
            return False
        for f in _files(self.d):
            p = self.d + "/" + f
            with open(p, "rb") as fh:
                r = fh.read()
            if not ok(r):  # cannot happen through keep(); never send it, never keep it
                os.remove(p)
                self.left -= 1
                continue
            t = "fleet/%s/crash" % self.id
            try:  # the record's bytes: the collector decodes them
                self.pid = self.c.publish(t, fit(r, self.c.max_packet - len(t) - 7), False, 1, block=False)
            except MQTTException:  # QueueFull, StoreFull: the next step tries again
                return False
            except ValueError as e:  # a max_packet too small for even its head: never sendable
                print("crash: record %s dropped: %s" % (f, e))
                os.remove(p)
                self.left -= 1
                continue
            self.f = p
            return True
        self.left = 0
        return False

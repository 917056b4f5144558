# The flash power-cut sweep: a device and its broker play a scripted workload on
# the emulated NOR flash, and at every program/erase of it the sweep forks: the
# flash as a cut there leaves it (the operation not done, or half done), with a
# copy of what the world outside the device knows (the application, the broker,
# its subscribers), goes through a reset: the store is mounted from that flash
# alone, the device reconnects, the work is finished, and the outcome is checked:
#   lost         a message publish() accepted that no subscriber ever received,
#                or an inbound QoS 2 message the application never got;
#   resurrected  a message whose completion the application was told of, sent again;
#   duplicated   a QoS 2 message received twice (outbound: by the subscribers,
#                inbound: by the application);
# and, allowed: QoS 1 messages resent after the reset (at least once).
# The uncut workload goes on after each fork, so a cut point costs one recovery,
# not a replay of the workload up to it. replay() cuts the plain way (arm the
# flash, run until the cut strikes) to prove a fork leaves the same flash and the
# same knowledge. A cut during the recovery's own mount (repairs: finishing a
# move, deleting a half-written file) is swept the same way, one level deep.
#
# Portable: CPython and the MicroPython unix port (bench/store.py runs it there;
# tests/portable/store_cases.py runs a short sweep on both). The file store is
# swept on LittleFS, so on MicroPython only.
import gc
import sys
from binascii import crc32

try:
    from fleetwire.host.portable.norflash import NorFlash, PowerCut
except ImportError:  # MicroPython: host code is not in the board tree
    from norflash import NorFlash, PowerCut
from fleetwire.ring.store import RingStore
from fleetwire.filestore import FileStore
from fleetwire.session import Session
from fleetwire.feed import feed
from fleetwire.store import StoreFull
from fleetwire.codec import wire

CONNECT, PUBLISH, PUBACK, PUBREC, PUBREL, PUBCOMP = 1, 3, 4, 5, 6, 7  # packet types

MP = sys.implementation.name == "micropython"
INFLIGHT = 4  # the device's in-flight window, and inbound QoS 2 it can hold
IN_MAX = 3  # inbound QoS 2 the broker leaves unfinished at once (< INFLIGHT)
MAX_PACKET = 128
OUTCOMES = ("lost", "resurrected", "duplicated", "qos1 again", "reordered", "errors")

_TOPIC = b"t/s"
_IN_TOPIC = b"in/t"


def qos_of(m):
    return 1 + (m & 1)


def payload_of(m):
    # 0..89 bytes of padding: records of many lengths, some torn in their middle
    return b"m%d." % m + b"." * ((m * 37) % 90)


def msg_number(payload, skip):
    k = skip
    while k < len(payload) and 48 <= payload[k] <= 57:
        k += 1
    return int(payload[skip:k])


class World:
    """What the world outside the device knows; it survives the device's resets.
    Per-message facts are bytearrays indexed by message number (cheap to copy)."""

    def __init__(self, size=0, src=None):
        if src is not None:
            self._copy(src)
            return
        # size: message numbers (and inbound numbers) the sweep may use
        self.acc = bytearray(size)  # publish() returned: its QoS
        self.done = bytearray(size)  # on_delivered: the application was told it is complete
        self.deliv = bytearray(size)  # received by the subscribers (capped at 255)
        self.got = bytearray(size)  # inbound: delivered to the application
        self.in_done = bytearray(size)  # inbound: the broker had PUBCOMP
        self.by_pid = {}  # packet id -> message number, in flight (the broker saw it)
        self.q2 = set()  # broker: QoS 2 packet ids awaiting PUBREL (method B)
        self.hold = {}  # message -> packet type whose answer the broker withholds
        self.owed = {}  # message -> (packet type, pid) withheld
        self.inb = []  # broker -> device QoS 2 flows: (pid, j, stage), in order;
        # stage 0: PUBLISH sent; 1: PUBREC came, PUBREL withheld; 2: PUBREL sent
        self.in_hold = set()  # inbound numbers whose PUBREL the broker withholds
        self.m = 0  # next message number
        self.j = 0  # next inbound number
        self.top = -1  # highest message received so far (order check)
        self.reordered = 0
        self.resurrected = 0
        self.session = False  # the broker has the device's session
        self.link = False
        self.cur = ("mount",)  # the call under way: a cut here leaves it in doubt

    def _copy(self, o):
        self.acc = bytearray(o.acc)
        self.done = bytearray(o.done)
        self.deliv = bytearray(o.deliv)
        self.got = bytearray(o.got)
        self.in_done = bytearray(o.in_done)
        self.by_pid = dict(o.by_pid)
        self.q2 = set(o.q2)
        self.hold = dict(o.hold)
        self.owed = dict(o.owed)
        self.inb = list(o.inb)
        self.in_hold = set(o.in_hold)
        self.m = o.m
        self.j = o.j
        self.top = o.top
        self.reordered = o.reordered
        self.resurrected = o.resurrected
        self.session = o.session
        self.link = o.link
        self.cur = o.cur

    def clone(self):
        return World(src=self)

    def digest(self):
        """A checksum of everything known (for comparing a fork with a replay)."""
        h = 0
        for b in (self.acc, self.done, self.deliv, self.got, self.in_done):
            h = crc32(b, h)
        rest = (
            sorted(self.by_pid.items()),
            sorted(self.q2),
            sorted(self.hold.items()),
            sorted(self.owed.items()),
            self.inb,
            sorted(self.in_hold),
            self.m,
            self.j,
            self.top,
            self.session,
            self.link,
            self.cur,
        )
        return crc32(repr(rest).encode(), h)

    # ---- the broker (MQTT 3.1.1, persistent session; QoS 2 in by method B:
    # the packet id is kept until PUBREL, the message goes on at once)

    def _deliver(self, m):
        if not self.deliv[m]:
            if m < self.top:
                self.reordered += 1
            self.top = max(self.top, m)
        if self.deliv[m] < 255:
            self.deliv[m] += 1

    def on_packet(self, t, pid, payload):
        """A packet the device wrote -> [(label, bytes)] the broker answers with."""
        if t == CONNECT:
            self.link = True
            self.owed = {}  # the device resends what they answered
            out = [(("connack",), b"\x20\x02\x01\x00" if self.session else b"\x20\x02\x00\x00")]
            self.session = True
            for p, j, stage in self.inb:
                if stage == 0:
                    out.append((("in_publish", j), _in_publish(p, j, True)))
                elif stage == 2:
                    out.append((("in_pubrel", j), _ack(PUBREL, p)))
            return out
        if t == PUBLISH:
            m = msg_number(payload, 1)
            if self.done[m]:
                self.resurrected += 1
            self.by_pid[pid] = m
            if qos_of(m) == 1:
                self._deliver(m)
                return self._answer(m, PUBACK, pid, ("puback", m))
            if pid not in self.q2:
                self.q2.add(pid)
                self._deliver(m)
            return self._answer(m, PUBREC, pid, ("pubrec", m))
        if t == PUBREL:
            m = self.by_pid.get(pid, -1)
            if m < 0 or self.done[m]:
                self.resurrected += 1
            self.q2.discard(pid)
            return self._answer(m, PUBCOMP, pid, ("pubcomp", m))
        if t == PUBREC or t == PUBCOMP:
            for k in range(len(self.inb)):
                p, j, stage = self.inb[k]
                if p != pid:
                    continue
                if t == PUBCOMP:
                    if stage != 2:
                        raise AssertionError("PUBCOMP %d before PUBREL" % pid)
                    self.inb.pop(k)
                    self.in_done[j] = 1
                    return []
                if j in self.in_hold:
                    self.inb[k] = (p, j, 1)
                    return []
                self.inb[k] = (p, j, 2)
                return [(("in_pubrel", j), _ack(PUBREL, p))]
            raise AssertionError(
                "%s for packet id %d the broker never sent" % ("PUBCOMP" if t == PUBCOMP else "PUBREC", pid)
            )
        raise AssertionError("unexpected packet type %d from the device" % t)

    def _answer(self, m, t, pid, label):
        if self.hold.get(m) == t:
            self.owed[m] = (t, pid)
            return []
        return [(label, _ack(t, pid))]

    def release(self, m):
        """The broker answers what it withheld for message m -> [(label, bytes)]."""
        self.hold.pop(m, None)
        if m not in self.owed or not self.link:
            return []
        t, pid = self.owed.pop(m)
        return [(({PUBACK: "puback", PUBREC: "pubrec", PUBCOMP: "pubcomp"}[t], m), _ack(t, pid))]

    def new_inbound(self, held):
        """The broker sends the next inbound QoS 2 message (the lowest free packet id:
        ids are reused as soon as a flow is complete) -> [(label, bytes)]."""
        used = [p for p, j, s in self.inb]
        pid = 1
        while pid in used:
            pid += 1
        j = self.j
        self.j += 1
        self.inb.append((pid, j, 0))
        if held:
            self.in_hold.add(j)
        return [(("in_publish", j), _in_publish(pid, j, False))] if self.link else []

    def release_inbound(self):
        """The broker sends the PUBREL it withheld longest -> [(label, bytes)]."""
        for k in range(len(self.inb)):
            p, j, stage = self.inb[k]
            if j in self.in_hold:
                self.in_hold.discard(j)
                if stage == 1:
                    self.inb[k] = (p, j, 2)
                    return [(("in_pubrel", j), _ack(PUBREL, p))] if self.link else []
                return []
        return []

    def outcome(self, deliv0):
        """-> [lost, resurrected, duplicated, qos1 again, reordered] for messages so far.
        deliv0: the subscribers' counts at the cut (QoS 1 sent again since is allowed)."""
        lost = dup = again = 0
        acc = self.acc
        deliv = self.deliv
        for m in range(self.m + 2):
            d = deliv[m]
            if acc[m] and not d:
                lost += 1
            if d > 1 and qos_of(m) == 2:
                dup += 1
            if deliv0 is not None and qos_of(m) == 1 and deliv0[m] and d > deliv0[m]:
                again += 1
        got = self.got
        for j in range(self.j):
            if not got[j]:
                lost += 1
            elif got[j] > 1:
                dup += 1
        return [lost, self.resurrected, dup, again, self.reordered]


def _ack(t, pid):
    b = bytearray(4)
    wire.pack_ack(b, t, pid)
    return bytes(b)


def _in_publish(pid, j, dup):
    b = bytearray(32)
    n = wire.put_publish(b, _IN_TOPIC, b"in%d" % j, 2, False, dup, pid)
    return bytes(b[:n])


# ---- the device


def new_flash(kind):
    """A fresh medium: a 4-block raw flash for the ring store; LittleFS on a 24-block
    flash for the file store (MicroPython)."""
    if kind == "ring":
        return NorFlash(4, block_size=512)
    import vfs

    f = NorFlash(24, block_size=512)
    vfs.VfsLfs2.mkfs(f)
    return f


def unmount(mnt):
    if MP:
        import vfs

        try:
            vfs.umount(mnt)
        except OSError:
            pass


class Device:
    """The board: a session with a store on the flash, and its link to the broker.
    mount() is a reset: everything but the flash is made anew."""

    def __init__(self, flash, world, kind, mnt="/st"):
        self.flash = flash
        self.w = world
        self.kind = kind
        self.mnt = mnt  # where LittleFS is mounted (the file store)
        self.moving = 0  # inside the ring's move of live records
        self.s = None

    def mount(self, label=("mount",)):
        w = self.w
        w.link = False
        w.cur = label
        if self.kind == "ring":
            st = RingStore(self.flash)
            live = st._live  # labels the flash operations of a move, for the table

            def moving(b, move=0):
                self.moving += move
                try:
                    return live(b, move)
                finally:
                    self.moving -= move

            st._live = moving
        else:
            import vfs

            unmount(self.mnt)
            vfs.mount(vfs.VfsLfs2(self.flash, mtime=False), self.mnt)  # no clock: repeatable
            st = FileStore(self.mnt + "/q")
        s = Session(
            b"dev",
            0,
            False,
            max_inflight=INFLIGHT,
            queue_size=INFLIGHT,
            max_packet=MAX_PACKET,
            max_subscriptions=1,
            store=st,
        )
        s.on_delivered = self._delivered
        s.cb = self._message
        self.s = s
        w.cur = ("idle",)

    def _delivered(self, pid):
        # a complete message's id is forgotten: a PUBREL with it later is a resurrection
        self.w.done[self.w.by_pid.pop(pid)] = 1

    def _message(self, topic, msg):
        j = msg_number(msg, 2)
        if self.w.got[j] < 255:
            self.w.got[j] += 1

    def subop(self, op, where, buf):
        """What a flash operation is for (the sweep's table rows)."""
        if op == "e":
            return "erase"
        if self.kind != "ring":
            return "program"
        bs = self.flash.block_size
        if len(buf) == 1:
            return "move: mark the original" if self.moving else "state bit"
        if where % bs == 0:
            return "block header" if len(buf) > 4 else "retire: zero header"
        return "move: copy" if self.moving else "record"

    # ---- what the application does

    def publish(self, m=None):
        """publish() the next message -> False if the store is full."""
        w = self.w
        if m is None:
            m = w.m
        w.cur = ("publish", m)
        if m >= len(w.acc) - 1:
            raise ValueError("the sweep's World was made for %d messages" % len(w.acc))
        try:
            self.s.publish(_TOPIC, payload_of(m), qos_of(m))
        except StoreFull:
            w.cur = ("idle",)
            w.m = m + 1
            return False
        w.acc[m] = qos_of(m)
        w.m = m + 1
        w.cur = ("idle",)
        return True

    def connect(self):
        self.s.start(0)  # CONNECT, written first: the broker answers it
        self.feed(self.w.on_packet(CONNECT, 0, b""))
        self.pump()

    def drop(self):
        """The link goes down; the device keeps running."""
        self.s.lost(0, None)
        self.w.link = False

    def feed(self, answers):
        s = self.s
        w = self.w
        for label, data in answers:
            w.cur = label
            feed(s, data, 0)
        w.cur = ("idle",)

    def pump(self):
        """Write what the device has to write, and let the broker answer, until quiet.
        A packet written reaches the broker at once (so a cut before the next one
        leaves the broker knowing it); the answers come after the device's writes."""
        s = self.s
        w = self.w
        while True:
            answers = []
            while True:
                w.cur = ("send",)
                p = next_packet(s)
                w.cur = ("idle",)
                if p is None:
                    break
                answers += w.on_packet(p[0], p[1], p[2])
            if not answers:
                return
            self.feed(answers)

    def inbound(self, held=False):
        if len(self.w.inb) < IN_MAX:
            self.feed(self.w.new_inbound(held))
            self.pump()

    def release(self, m):
        self.feed(self.w.release(m))
        self.pump()

    def release_inbound(self):
        self.feed(self.w.release_inbound())
        self.pump()

    def release_all(self):
        w = self.w
        for m in sorted(w.hold):
            self.feed(w.release(m))
        for _ in range(len(w.in_hold)):
            self.feed(w.release_inbound())
        w.in_hold = set()
        self.pump()

    def settled(self):
        s = self.s
        return not (s.pending or s.inflight or s.store.backlog)


def next_packet(s):
    """The next packet the session writes -> (type, pid, payload), None if none is due."""
    n = s.pack(0)
    if not n:
        return None
    tx = s.tx
    t = tx[0] >> 4
    if t == PUBLISH:
        h = 2
        while tx[h - 1] & 0x80:
            h += 1
        _, pid, ps = wire.publish_fields(tx[0], tx[h:], n - h)
        return (t, pid, bytes(tx[h + ps : n]))
    if t in (PUBREL, PUBACK, PUBREC, PUBCOMP):
        return (t, tx[2] << 8 | tx[3], None)
    return (t, 0, None)


def age(flash, n):
    """n QoS 1 messages published and acknowledged on the ring before the workload:
    a device that has run a while, whose record sequence numbers and packet ids
    wrap (at 65536) during the workload."""
    s = Session(
        b"dev",
        0,
        False,
        max_inflight=INFLIGHT,
        queue_size=INFLIGHT,
        max_packet=MAX_PACKET,
        max_subscriptions=1,
        store=RingStore(flash),
    )
    s.start(0)
    s.pack(0)
    feed(s, b"\x20\x02\x00\x00", 0)
    for _ in range(n):
        pid = s.publish(_TOPIC, b"aged", 1)
        s.pack(0)
        feed(s, _ack(PUBACK, pid), 0)


# ---- the workload


def workload(dev, rounds, per_round=40):
    """The device's scripted life: offline backlogs (once until the store is full),
    QoS 1 and 2 publishes online, the broker holding acks back (a QoS 1 message,
    and a QoS 2 one after PUBREC, stay in flight while the ring wraps: their
    records must move), inbound QoS 2 whose PUBREL the broker withholds for a while,
    a dropped link, and planned resets."""
    w = dev.w
    dev.mount()
    for r in range(rounds):
        for _ in range(3 + r % 5):  # offline: a backlog builds up on flash
            dev.publish()
        if r % 6 == 5:
            while dev.publish():  # offline until the store is full
                pass
        dev.connect()
        m = w.m
        w.hold[m + (m & 1)] = PUBACK  # a QoS 1 message stays unacknowledged
        # and a QoS 2 one, before PUBREC (its record SENT) or after (REL)
        w.hold[m + 1 - (m & 1)] = PUBREC if r % 2 else PUBCOMP
        for k in range(per_round):
            dev.publish()
            dev.pump()
            if k % 6 == 2:
                dev.inbound(held=k % 12 == 2)
            if k % 12 == 9:
                dev.release_inbound()
            if k == per_round // 2:
                dev.drop()  # the link drops; the device keeps its RAM
                dev.publish()
                dev.connect()
        if r % 2:
            dev.publish()
            dev.mount()  # a planned reset with messages in flight
            dev.publish()
            dev.connect()
        dev.release_all()
    dev.connect()
    dev.release_all()
    dev.mount()


def finish(dev, tail=30):
    """After a reset: reconnect, let the broker give back all it held, finish the
    work, then keep working long enough to wrap the ring (a message kept in flight
    meanwhile, so live records move) and settle."""
    w = dev.w
    w.hold = {}
    dev.connect()
    dev.release_all()
    w.m += 1  # the message under way at the cut (if any) stays in doubt
    m = w.m
    w.hold[m + (m & 1)] = PUBACK
    for k in range(tail):
        dev.publish()
        dev.pump()
        if k % 10 == 4:
            dev.inbound()
    dev.release_all()
    if not dev.settled() or w.inb or w.q2:
        # (a QoS 2 id the broker still holds would make it drop a later message with that id)
        raise AssertionError(
            "the work did not finish: %d pending, %d in flight, %d stored, "
            "%d inbound flows open, %d QoS 2 ids the broker holds"
            % (dev.s.pending, dev.s.inflight, dev.s.store.backlog, len(w.inb), len(w.q2))
        )


# ---- the sweep


class Sweep:
    """Fork at every flash operation of the workload (every nshards-th, from shard)."""

    def __init__(
        self, kind="ring", rounds=6, per_round=40, tail=0, shard=0, nshards=1, samples=0, nested=True, aged=0
    ):
        # tail: messages each recovery publishes after finishing the work; enough to
        # wrap the ring (LittleFS has more room and costs more per message)
        tail = tail or (30 if kind == "ring" else 12)
        self.kind = kind
        self.aged = aged
        self._aged = None
        self._spares = {}
        self.rounds = rounds
        self.per_round = per_round
        self.tail = tail
        self.shard = shard
        self.nshards = nshards
        self.nested = nested
        self.tally = {}  # phase -> [cut points] + OUTCOMES
        self.errors = []  # the first few failures, described
        self.samples = samples
        self.picked = []  # (op, partial, crc of the cut flash, world digest) to replay
        self.ops = 0
        self.recovery_ops = 0  # flash operations the recoveries made
        # message numbers used: each round publishes per_round + a few, and once in six
        # rounds fills the store offline; each recovery publishes tail more
        self.size = rounds * (per_round + 12) + (rounds // 6 + 1) * 128 + 2 * tail + 64

    def medium(self):
        """A fresh flash for the workload (aged once, then copied)."""
        if not self.aged:
            return new_flash(self.kind)
        if self._aged is None:
            self._aged = new_flash(self.kind)
            age(self._aged, self.aged)
        return self._aged.copy()

    def run(self):
        flash = self.medium()
        self.base = flash.ops
        w = World(self.size)
        dev = Device(flash, w, self.kind, "/st")
        # which operations to sample for the replay check: spread over the workload
        self._every = 0
        self._forks = 0
        if self.samples:
            probe = self.medium()
            workload(Device(probe, World(self.size), self.kind, "/st"), self.rounds, self.per_round)
            unmount("/st")
            self._every = max(1, (probe.ops - self.base) // self.nshards // self.samples)
            probe = None
            gc.collect()

        def watch(op, where, buf):
            k = flash.ops + 1
            if (k - self.base) % self.nshards != self.shard:
                return
            phase = "%s: %s" % (w.cur[0], dev.subop(op, where, buf))
            for partial in (False, True):
                img = flash.cut_copy(op, where, buf, partial, seed=k, into=self._spare(1, flash))
                if self._every and self._forks % self._every == 0 and len(self.picked) < 2 * self.samples:
                    self.picked.append((k, partial, crc32(img.data), w.digest()))
                self.recover(img, w.clone(), phase, k, partial, 1)
                img = None
            self._forks += 1

        flash.watch = watch
        workload(dev, self.rounds, self.per_round)
        flash.watch = None
        self.ops = flash.ops - self.base
        got = w.outcome(None)
        unmount("/st")
        if got != [0, 0, 0, 0, 0] or w.q2 or w.inb:
            raise AssertionError("the workload itself, uncut, went wrong: %r" % got)
        return self

    def recover(self, img, w, phase, k, partial, depth):
        """A reset after the cut: mount the flash as the cut left it, finish, check."""
        row = self.tally.get(phase)
        if row is None:
            row = self.tally[phase] = [0] * (1 + len(OUTCOMES))
        row[0] += 1
        mnt = "/c%d" % depth
        dev = Device(img, w, self.kind, mnt)
        deliv0 = bytes(w.deliv)
        try:
            if self.nested and depth == 1:
                # a second cut while the mount repairs what the first one left
                def watch(op, where, buf):
                    n = img.ops + 1
                    sub = "restore: %s" % dev.subop(op, where, buf)
                    if phase.startswith("in_publish:"):
                        sub += ", 1st cut in in_publish"  # its duplicates are the 1st cut's
                    for p2 in (False, True):
                        self.recover(
                            img.cut_copy(op, where, buf, p2, seed=n, into=self._spare(2, img)),
                            w.clone(),
                            sub,
                            k,
                            partial,
                            2,
                        )

                img.watch = watch
            img.power_on()
            dev.mount(("restore",))
            img.watch = None
            finish(dev, self.tail)
            got = w.outcome(deliv0)
        except Exception as e:  # noqa: BLE001  (a failed recovery is a result to report)
            got = [0, 0, 0, 0, 0, 1]
            self.note(phase, k, partial, depth, "%s: %s" % (type(e).__name__, e))
        img.watch = None
        self.recovery_ops += img.ops
        unmount(mnt)
        for i in range(len(got)):
            row[1 + i] += got[i]
        if got[0] or got[1] or got[2]:
            self.note(phase, k, partial, depth, "lost %d, resurrected %d, duplicated %d" % tuple(got[:3]))

    def note(self, phase, k, partial, depth, what):
        if len(self.errors) < 40:
            self.errors.append(
                "op %d%s%s [%s]: %s"
                % (
                    k - self.base,
                    " torn" if partial else "",
                    " (cut again in the restore)" if depth > 1 else "",
                    phase,
                    what,
                )
            )

    def replay(self):
        """Cut the picked operations the plain way: a fresh flash armed to fail there,
        the workload run until the cut strikes. -> the ones where the flash or the
        world differ from the fork's."""
        bad = []
        for k, partial, crc, digest in self.picked:
            flash = self.medium()
            w = World(self.size)
            flash.arm(k - flash.ops, partial, seed=k)
            try:
                workload(Device(flash, w, self.kind, "/st"), self.rounds, self.per_round)
            except PowerCut:
                pass
            else:
                bad.append((k - self.base, partial, "the workload ended before the cut"))
            unmount("/st")
            if crc32(flash.data) != crc or w.digest() != digest:
                bad.append(
                    (
                        k - self.base,
                        partial,
                        "flash %s, world %s"
                        % (
                            "same" if crc32(flash.data) == crc else "differs",
                            "same" if w.digest() == digest else "differs",
                        ),
                    )
                )
            flash = w = None
            gc.collect()
        return bad

    def _spare(self, depth, like):
        # one flash per depth, reused by every recovery at that depth: no new buffer
        # per cut point (LittleFS's flash is 12 KB, which a fragmented heap may not have)
        f = self._spares.get(depth)
        if f is None:
            f = self._spares[depth] = like.copy()
        return f

    def cuts(self):
        return sum(r[0] for r in self.tally.values())

    def failures(self):
        """-> lost + resurrected + duplicated + errors over all cut points."""
        t = [0] * len(OUTCOMES)
        for r in self.tally.values():
            for i in range(len(OUTCOMES)):
                t[i] += r[1 + i]
        return t[0] + t[1] + t[2] + t[5]

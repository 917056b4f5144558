# Message stores: the interface a store offers the session, the state bits of a stored
# record, and the session's side of it (loaded when the client is built with store=).
# RingStore (ring/store.py, a raw flash partition), FileStore (filestore.py, files) and
# RamStore (ramstore.py) implement it; both sides import this module, not each other.
# What runs once (opening a store, restoring the session) is in mount.py, a RingStore's own
# in ring/mount.py, each run by once().
#
# A store holds QoS 1/2 messages from publish() until they complete, and the ids of
# inbound QoS 2 messages until PUBREL, so both survive a reset. What it offers:
#   open(max_packet, on_move) -> the length of the longest PUBLISH stored (0: none)
#                       mount; after it, .window [[seq, handle, kind, state, pid]]
#                       holds what was restored, oldest first: kind is the PUBLISH's first
#                       byte of a message written and not complete, 0x5A for an inbound id;
#                       .last_pid the highest packet id stored. on_move(old, new) is
#                       called when a live record moves
#   add(topic, msg, qos, retain, pid) -> handle   raises StoreFull, leaving all as it was
#   add_inbound(pid) -> handle   an inbound QoS 2 id (further arguments are ignored)
#   end(handle, bit)    the state the bit names is over (flash can only clear bits)
#   backlog             records never written; .cur the oldest one's handle and .pk_pid
#                       its packet id; in_backlog(pid)
#   load(handle, buf) -> n    the stored PUBLISH packet into buf
#   message(handle) -> (topic, msg)   (allocates: for on_discarded)
#   forget_inbound(pid)  the inbound record of pid is over (its handle is not known)
#   clear()              forget everything
try:
    from micropython import const
except ImportError:
    from .cpython import const

from . import MQTTException


class StoreFull(MQTTException):
    """The message store has no room; what it holds is kept. Connect, or publish less."""


# A record's state bits, each set while what it names is true; cleared as it passes.
UNSENT = const(1)  # never written to a connection (after it: resent with DUP)
AWAIT_REC = const(2)  # QoS 2, no PUBREC yet (after it: only PUBREL is sent, MQTT-4.3.3-1)
LIVE = const(4)  # not complete (cleared: the record is dead, its space reusable)


# ---- the session's side (s is the Session)


def attach(s, store):
    import sys

    s._st = sys.modules[__name__]
    once("mount", "attach", s, store, lambda old, new: _moved(s, old, new))


def once(m, f, *args):
    # fleetwire.<m>.f(*args): code that runs once is loaded for the call and dropped after
    # it, so a board keeps in RAM only the code that goes on running
    import sys

    k = __name__[:-5] + m
    had = k in sys.modules
    mod = __import__(k, None, None, ["_"])
    try:
        return getattr(mod, f)(*args)
    finally:
        if not had:
            del sys.modules[k]
            p, _, n = k.rpartition(".")
            delattr(sys.modules[p], n)


def pack_stored(s):
    # the oldest stored message never written, into tx and a slot at the ring's end
    st = s.store
    if not st.backlog:
        return 0
    h = st.cur
    if s._n == len(s._f):
        s._compact()  # gaps left by acks out of order (a slot is free: the window has room)
    pid = st.pk_pid
    n = st.load(h, s.tx)
    st.end(h, UNSENT)  # before it is written: after a reset it goes again, with DUP
    i = s._slot(s._n)
    s._n += 1
    s._c = s._n
    s._m[i] = h
    s._p[i] = pid
    s._f[i] = (s.tx[0] >> 1 & 3) | 16  # WRITTEN
    s.inflight += 1
    return n


def load(s, h, dup):
    n = s.store.load(h, s.tx)
    if dup:
        s.tx[0] |= 8
    return n


def done(s, h):
    s.store.end(h, LIVE)


def received(s, h):
    s.store.end(h, AWAIT_REC)  # a restart now sends PUBREL, not the PUBLISH


def _moved(s, old, new):
    # the store moved a live record to reuse its block
    for i in range(len(s._f)):
        if s._f[i] and s._t[i] is None and s._m[i] == old:
            s._m[i] = new
            return
    if s._q2:
        s._q2.moved(s, old, new)

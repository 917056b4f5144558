# What a client with store= runs once: opening the store it was given and restoring the
# session from what the store held. store.once() loads this module for the call and drops it
# after, so a board keeps in RAM only the code that goes on running. (A RingStore's own
# run-once code, its checks and its scan, is ring/mount.py.)
try:
    from micropython import const
except ImportError:
    from .cpython import const

from . import say
from .store import AWAIT_REC

_IN = const(0x5A)  # a stored record's kind for an inbound QoS 2 id (store.py's interface)
# errors, by their line in reasons.TEXT
_STORE_ARG = const(9)


def open_store(store):
    """store= of the client: a directory path (FileStore), a block device such as an
    esp32.Partition (RingStore), or a store object."""
    if hasattr(store, "add"):
        return store
    if isinstance(store, str):
        from .filestore import FileStore

        return FileStore(store)
    if hasattr(store, "readblocks"):
        from .ring.store import RingStore

        return RingStore(store)
    raise ValueError(say(_STORE_ARG))


def attach(s, store, on_move):
    """Mount the store given as store= and restore the session from it."""
    store = open_store(store)
    s.store = store
    s._fit(store.open(s.max_packet, on_move))  # tx takes the longest PUBLISH stored
    from . import renew

    s._rn = renew  # what is restored is in flight: renewed at CONNACK
    # Paho's restore: what was written goes in flight again (PUBREL if PUBREC came, else
    # PUBLISH with DUP), oldest first; inbound QoS 2 ids wait for PUBREL.
    for _, h, first, state, pid in store.window:
        if first == _IN or first & 6 == 4 or not state & AWAIT_REC:
            s.need_qos2()
        if first == _IN:
            s._q2.restore(s, pid, h)
            continue
        i = s._slot(s._n)
        s._n += 1
        s._m[i] = h
        s._p[i] = pid
        s._f[i] = (first >> 1 & 3) | (4 if first & 1 else 0) | (16 if state & AWAIT_REC else 24)
        s.inflight += 1
        s._c = s._n
    store.window = None
    s._last_pid = store.last_pid

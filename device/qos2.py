# QoS 2 flows beyond the core's: loaded by the first call that needs them (a QoS 2 publish
# or subscription, a persistent session, a store), never by a packet's arrival.
#
# Outbound (§4.3.3): PUBLISH -> PUBREC: the slot is RECEIVED (the broker has it; on flash
# the record's AWAIT_REC bit is cleared, so a restart sends PUBREL, not the PUBLISH)
# and PUBREL is due -> PUBCOMP completes it.
# Inbound, MQTT's "method B" (the core delivers a message when it arrives and sends
# PUBREC): only its packet id is kept until PUBREL, so a repeat is answered with PUBREC
# and never delivered twice (MQTT-4.3.3-2), on this connection and, with a kept session,
# the next. The ids go into a table of _N (with their store
# handles), which holds what a broker's usual window sends; past it, into a bitmap of all
# 65535 ids in 16 parts of 512 bytes, made when first needed and dropped when empty: any
# number a conforming broker may send is taken, in at most 8 KB.
try:
    from micropython import const
except ImportError:
    from .cpython import const

from . import MQTTException, say

# errors, by their line in reasons.TEXT (a number costs a board no interned name)
_RX_MEM = const(25)

# packet types (as packets.CONNACK...: constants of this module, no lookups)
_PUBREL = const(6)
_PUBCOMP = const(7)
_N = const(32)


def setup(s):
    s._xp = [0] * _N  # inbound ids kept until PUBREL (0: free)
    s._xh = [-1] * _N  # their store handles
    s._xb = None  # the bitmap's parts past the table


def ack(s, t, pid):
    # PUBREC, PUBREL or PUBCOMP, received
    if t == _PUBREL:
        forget(s, pid)
        s._flow(_PUBCOMP, pid)
    elif t == _PUBCOMP:
        s._complete(pid, t)
    else:
        for k in range(s._n):
            i = s._slot(k)
            f = s._f[i]
            if s._p[i] == pid and f & 3 == 2 and f & 24 == 16:  # QoS 2, WRITTEN
                s._f[i] = f | 24  # RECEIVED
                if s._t[i] is None:
                    s._st.received(s, s._m[i])
                break
        # ours or not, PUBREL answers it (for another's, so the broker can finish: Paho)
        s._flow(_PUBREL, pid)


def take(s, pid):
    """An inbound QoS 2 PUBLISH -> True if it repeats one delivered and not yet released;
    else its id is kept from now (the room for it is certain before it is delivered)."""
    if _find(s, pid) >= 0:
        return True
    part = s._xb[pid >> 12] if s._xb else None
    if part is not None and part[pid >> 3 & 511] & 1 << (pid & 7):
        return True
    k = _find(s, 0)
    if k >= 0:
        s._xp[k] = pid
        return False
    if s._xb is None:
        s._xb = [None] * 16
    if part is None:
        try:
            part = s._xb[pid >> 12] = bytearray(512)
        except MemoryError:  # not acknowledged: the broker delivers it again later
            raise MQTTException(say(_RX_MEM, pid))
    part[pid >> 3 & 511] |= 1 << (pid & 7)
    return False


def delivered(s, pid):
    """The application has it: with a store, its id goes on flash too. A reset between the
    callback and this write delivers it again (at least once, never lost); a full store
    keeps the id in RAM only (exactly once until a reset) and the link stays up."""
    if s.store is None:
        return
    try:
        h = s.store.add_inbound(pid, b"", 0)
    except MQTTException:  # StoreFull
        return
    k = _find(s, pid)
    if k >= 0:
        s._xh[k] = h


def forget(s, pid):
    """PUBREL (or a failed delivery): the id is free again."""
    k = _find(s, pid)
    if k >= 0:
        if s._xh[k] >= 0:
            s._st.done(s, s._xh[k])
        s._xp[k] = 0
        s._xh[k] = -1
        return
    part = s._xb[pid >> 12] if s._xb else None
    if part is None or not part[pid >> 3 & 511] & 1 << (pid & 7):
        return
    part[pid >> 3 & 511] &= ~(1 << (pid & 7))
    if s.store is not None:
        s.store.forget_inbound(pid)
    for i in range(512):
        if part[i]:
            return
    s._xb[pid >> 12] = None  # empty: its 512 bytes go back to the heap


def new_session(s):
    """The broker has no session: no PUBREL will come for the ids kept."""
    for k in range(_N):
        if s._xp[k]:
            forget(s, s._xp[k])
    for c in range(16 if s._xb else 0):
        part = s._xb[c]
        for i in range(512 if part else 0):
            for j in range(8 if part[i] else 0):
                if part[i] & 1 << j:
                    forget(s, c << 12 | i << 3 | j)


def restore(s, pid, h):
    """An id kept on flash before a restart."""
    take(s, pid)
    k = _find(s, pid)
    if k >= 0:
        s._xh[k] = h


def moved(s, old, new):
    for k in range(_N):
        if s._xh[k] == old:
            s._xh[k] = new
            return True
    return False


def _find(s, pid):
    p = s._xp
    for k in range(_N):
        if p[k] == pid:
            return k
    return -1

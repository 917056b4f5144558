# What a CONNACK does to what an earlier connection left (loaded by a connect() after the
# first, or by a store that restored messages): the messages written and not complete are
# discarded on a clean session, as Paho does (said through on_discarded), or written again
# in order with their ids (MQTT-4.4.0-1); messages never written wait either way. The
# subscriptions the broker may not have are made again: all of them if its session is new
# (an UNSUBSCRIBE not yet answered goes again; with a new session there is nothing to undo).
try:
    from micropython import const
except ImportError:
    from .cpython import const

# session.py's slot and subscription states (a private const is not a module attribute)
_QUEUED = const(8)
_STATE = const(24)
_RESEND = const(32)
_S_SUB = const(1)
_S_UNSUB = const(3)
_S_UNSUBACK = const(4)
_S_ACTIVE = const(5)


def renew(s, present):
    for k in range(s._n):
        i = s._slot(k)
        f = s._f[i]
        if f & _STATE > _QUEUED:
            if s.clean_session:
                if s.on_discarded:
                    t, m = s.store.message(s._m[i]) if s._t[i] is None else (s._t[i], s._m[i])
                    s.on_discarded(t, m, f & 3)
                s._release(i)
            else:
                s._f[i] = f | _RESEND
    s._c = 0
    s._advance()
    if s._q2 and not present:
        s._q2.new_session(s)  # no PUBREL will come for the ids kept
    for i in range(len(s._sf)):
        st = s._ss[i]
        if s._sf[i] is None or st & 0x80:
            continue
        if st == _S_UNSUB or st == _S_UNSUBACK:
            if present:
                s._sub_queue(i, _S_UNSUB)
            else:
                s._sf[i] = None
        elif st < _S_ACTIVE or not present:
            s._sub_queue(i, _S_SUB)

# drop_oldest=True: a full queue makes room by dropping its oldest QoS 0 message never
# written (counted in `dropped`, said through on_discarded). Loaded by that option.


def drop(s):
    """-> True if a message was dropped."""
    for k in range(s._c, s._n):
        i = s._slot(k)
        f = s._f[i]
        if f and not f & 3:
            s._queued -= 1
            s.dropped += 1
            if s.on_discarded:
                s.on_discarded(s._t[i], s._m[i], 0)
            s._release(i)
            s._advance()
            return True
    return False

# Bytes in, any amount, for a driver that writes the session's packets between calls: the
# tests' scripted brokers, the power-cut sweeps, the store bench. An I/O loop reads into
# Session.rx() and calls received() instead, without a copy; this module is never loaded
# by a client, so a board pays nothing for it.
try:
    from micropython import const
except ImportError:
    from .cpython import const

from . import say

# errors, by their line in reasons.TEXT
_ACKS_FULL = const(28)


def feed(s, data, now):
    """Hand data to session s, as if read from its link. With no room left for the acks
    due (they were not written between calls), raises ProtocolError."""
    i = 0
    while i < len(data):
        v = s.rx()
        k = min(len(v), len(data) - i)
        if not k:
            from .errkinds import ProtocolError

            raise ProtocolError(say(_ACKS_FULL))
        v[:k] = data[i : i + k]
        i += k
        s.received(k, now)

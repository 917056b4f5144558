# Staying connected (reconnect=True), sans-IO: when a link that had its CONNACK goes down,
# these decide whether and when to connect again, for the blocking and the asyncio client
# alike. Loaded when a client is built with reconnect=True.
#
# Backoff starts at backoff_min and doubles to backoff_max (Paho's 1 s and 128 s); each wait
# is 50..100 % of the delay at random, so a fleet that lost its broker at one moment does
# not come back at one moment; it starts over after a connection that stayed up 60 s.
# Only "server unavailable" (CONNACK 3) of the broker's refusals is worth retrying. A
# broker that closes the link soon after accepting it, takeover_kicks times in a row,
# means another client uses this client id: SessionTakenOver ends the retries.
try:
    from random import getrandbits
except ImportError:  # a port built without random
    from .cpython import getrandbits
try:
    from micropython import const
    from time import ticks_diff
except ImportError:
    from .cpython import const, ticks_diff

import sys

from . import MQTTException, say

# errors, by their line in reasons.TEXT (a number costs a board no interned name)
_TAKEN_OVER = const(16)


class SessionTakenOver(MQTTException):
    """The broker keeps closing the connection right after accepting it: another client
    uses the same client id. Client ids must be unique per device."""


def setup(s, lo, hi, kicks):
    s._rc = __import__(__name__, None, None, ["_"])
    s._lo = int(lo * 1000)
    s._hi = int(hi * 1000)
    s._kicks_max = kicks
    s._delay = s._attempt = s._kicks = 0
    s.eof = False  # the broker closed the link (FIN): set by the I/O loop
    from . import renew

    s._rn = renew  # a reconnect renews what the last connection left


def went_down(s, now):
    # a link that had its CONNACK is gone
    up = ticks_diff(now, s._up_at)
    # closed by the broker soon after CONNACK: a sign of a client id clash (a reset or a
    # timeout is the network's doing)
    s._kicks = s._kicks + 1 if s.eof and up < 60000 else 0
    if up >= 60000:
        s._delay = s._attempt = 0  # it stayed up: the backoff starts over


def retry(s, why):
    """-> ms to wait before the next attempt; raises when there will be none."""
    # ConnectRefused (errkinds.py) is loaded by the refusal raised: not loaded, not one
    ek = sys.modules.get("fleetwire.errkinds")
    if ek and isinstance(why, ek.ConnectRefused) and why.args[0] != 3:
        s.reconnect = False
        raise why
    if s._kicks_max and s._kicks >= s._kicks_max:
        s.reconnect = False
        raise SessionTakenOver(say(_TAKEN_OVER, s._kicks, s.client_id))
    d, wait = backoff(s._delay, s._lo, s._hi, getrandbits(16))
    s._delay = d
    s._attempt += 1
    if s.on_reconnect:
        s.on_reconnect(s._attempt, wait)
    return wait


def backoff(prev, lo, hi, rnd16):
    """The delay after `prev` ms (0: first try) -> (delay, wait): the delay doubles from lo to
    hi ms; the wait is 50..100 % of it (rnd16: 16 random bits)."""
    d = prev * 2 if prev else lo
    if d > hi:
        d = hi
    return d, d // 2 + rnd16 * (d // 2) // 65536

# What MQTTClient and AsyncClient share (session.Front), checked on both fronts
# without a broker. Portable: runs unchanged on CPython and on the MicroPython
# unix port (tests/portable/run.py).

from fleetwire.client import MQTTClient
from fleetwire.aio import AsyncClient
from run import raises

# On MicroPython (tests/portable/test_portable.py): the heap, and the modules it imports by
# their bare names (beside it, or fleetwire.host.portable's), compiled with it.
HEAP = "96K"
ALSO = ()


def fronts():
    for front in (MQTTClient, AsyncClient):
        yield front("dev", "127.0.0.1", queue_size=4, max_inflight=2, max_packet=256)


def test_a_will_is_checked_when_it_is_set_on_both_fronts():
    for c in fronts():
        raises(ValueError, c.set_last_will, "", "bye")
        raises(ValueError, c.set_last_will, "w", "bye", False, 3)
        c.set_last_will("w", "bye", True, 1)
        if c.will != (b"w", b"bye", 1, True):
            raise AssertionError(c.will)


def test_the_port_defaults_to_1883_and_to_8883_with_tls():
    for front in (MQTTClient, AsyncClient):
        if front("dev", "h").port != 1883 or front("dev", "h", ssl=object()).port != 8883:
            raise AssertionError(front)
        if front("dev", "h", 1999).port != 1999:
            raise AssertionError(front)


def test_a_new_client_has_nothing_pending_and_no_store():
    for c in fronts():
        if (c.pending, c.inflight, c.dropped, c.store, c.is_connected()) != (0, 0, 0, None, False):
            raise AssertionError((c.pending, c.inflight, c.dropped, c.store))
        if c.in_flight(1):
            raise AssertionError("packet id 1 in flight on a new client")

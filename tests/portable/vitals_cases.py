# The vitals agent's record against the real client and store, offline. Portable: runs
# unchanged on CPython and on the MicroPython unix port (tests/portable/run.py).

import json

from fleetwire import MQTTClient
from fleetwire.ramstore import RamStore
from fleetwire.vitals import RamState, Vitals

# On MicroPython (tests/portable/test_portable.py): the heap, and the modules it imports by
# their bare names (beside it, or fleetwire.host.portable's), compiled with it.
HEAP = "96K"
ALSO = ()


def store_used(v):
    return json.loads(bytes(v.make()))["store_used"]


def test_store_used_counts_the_records_waiting_in_the_clients_store():
    # offline with a store: QoS 1 messages wait in flash, and the record says how many
    c = MQTTClient(b"vit-store", "127.0.0.1", 1, reconnect=True, store=RamStore())
    v = Vitals(c, "vit-store", "2.1.0", state=RamState())
    v.boot()
    assert store_used(v) == 0
    for i in range(3):
        c.publish(b"fleet/vit-store/log", b"m%d" % i, qos=1, block=False)
    assert c.store.backlog == 3
    assert store_used(v) == 3


def test_store_used_is_zero_without_a_store_or_a_client():
    c = MQTTClient(b"vit-nostore", "127.0.0.1", 1, reconnect=True)
    assert c.store is None
    for client in (c, None):
        v = Vitals(client, "vit-nostore", "2.1.0", state=RamState())
        v.boot()
        assert store_used(v) == 0

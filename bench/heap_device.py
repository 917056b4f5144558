# The device side of bench/heap.py, on the MicroPython unix port:
#   micropython heap_device.py fleetwire|umqtt HOST PORT default|small|import
# Prints "MOD <module> <bytes>" for each module the client's import loads, lowest first,
# then "IMPORT <bytes>" and "CONNECT <bytes>" (after connect + subscribe), all from
# gc.mem_alloc() after a collection. "import" stops after IMPORT (for the smallest heap
# the import alone needs).
import sys
import gc

client, host, port, options = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]

# What `from fleetwire import MQTTClient` loads, each after the modules it imports, so
# each line is that module alone. Checked below: a module missing here fails the run.
FLEETWIRE = ("fleetwire", "fleetwire.codec", "fleetwire.codec.errors", "fleetwire.codec.text",
             "fleetwire.codec.topics", "fleetwire.codec.wire", "fleetwire.codec.stream",
             "fleetwire.session", "fleetwire.client")
# The smallest settings a device with one subscription and short messages might choose.
SMALL = {"max_packet": 256, "queue_size": 4, "max_inflight": 2, "max_subscriptions": 2}


def mem():
    gc.collect()
    return gc.mem_alloc()


base = mem()
if client == "fleetwire":
    for name in FLEETWIRE:
        before = mem()
        __import__(name)
        print("MOD", name, mem() - before)
    loaded = set(m for m in sys.modules if m.startswith("fleetwire"))
    from fleetwire import MQTTClient
    extra = [m for m in sys.modules if m.startswith("fleetwire") and m not in loaded]
    if extra:
        print("UNLISTED", " ".join(extra))  # the host stops: the breakdown would be wrong
        sys.exit(1)
else:
    from umqtt.simple import MQTTClient
print("IMPORT", mem() - base)
if options == "import":
    sys.exit(0)
kw = SMALL if client == "fleetwire" and options == "small" else {}
c = MQTTClient(b"bench-heap", host, port, keepalive=60, **kw)
c.set_callback(lambda t, m: None)
c.connect()
c.subscribe(b"bench/in", 1)
print("CONNECT", mem() - base)
c.disconnect()

# The device side of bench/renew_heap.py, on the MicroPython unix port (fleetwire from .mpy):
#   micropython renew_heap_device.py DIR
# DIR holds a board's identity (tls/ca.der, tls/cert.der, tls/key.der, tls/new.der: the
# renewed certificate). A board program with mutual TLS has the client and fleetwire.identity
# loaded: that is the base. Then, each after gc.collect(), gc.mem_alloc() over the base:
# the resident watch (fleetwire.tls.watch and its Watch, which has run once to know when
# renewal is due); the work loaded (fleetwire.tls.renew and fleetwire.tls.check, as step()
# loads them); the most in use during a switch (sampled at the test connection, where the new
# certificate's context, the old one and the modules are all alive; the connection itself is
# the client's reconnection: its TLS session is bench/tls_heap.py's); and after it, once the
# work is dropped. One JSON line, after qstr_info()'s lines around the watch's import.
import gc
import json
import os
import sys

import micropython

from fleetwire import MQTTClient  # noqa: F401  (the board program's client)
import fleetwire.identity  # noqa: F401  (loaded with TLS, before any renewal)

D = sys.argv[1]
os.chdir(D)
CFG = {
    "device_id": "bench-renew",
    "broker": "localhost",
    "port": 8883,
    "tls_ca": "tls/ca.der",
    "tls_cert": "tls/cert.der",
    "tls_key": "tls/key.der",
    "cert_renew_days": 30,
}


def used():
    gc.collect()
    return gc.mem_alloc()


peak = [0]


class Client:
    # what the watch and the switch call; the connection is no part of what renewal adds
    rest = 0
    ssl = None
    cb = None

    def set_callback(self, f):
        self.cb = f

    def subscribe(self, topic, qos=0):
        pass

    def publish(self, topic, msg, retain=False, qos=0, block=True):
        pass

    def disconnect(self):
        pass

    def connect(self, clean_session=True):
        u = used()
        if u > peak[0]:
            peak[0] = u
        return 0


R = {}
c = Client()
c.ssl = fleetwire.identity.Context(CFG)
base = used()
micropython.qstr_info()  # "qstr pool: ... n_total_bytes=N": the interned names' table, before
from fleetwire.tls import watch  # noqa: E402

w = watch.Watch(c, CFG)
R["resident"] = used() - base
micropython.qstr_info()  # and after: the watch's names (and the table's new room, if it grew)
import fleetwire.tls.renew  # noqa: E402, F401
import fleetwire.tls.check  # noqa: E402, F401

R["work"] = used() - base - R["resident"]
fleetwire.identity.drop("tls.renew")
fleetwire.identity.drop("tls.check")
with open("tls/new.der", "rb") as f:
    new = f.read()
w.msg = (w.pre + b"new", new)
w.step()
new = None
R["peak"] = peak[0] - base
R["after"] = used() - base
R["switched"] = "cert.der.new" not in os.listdir("tls") and "cert.der.old" not in os.listdir("tls")
print(json.dumps(R))

# The device side of bench/tls_heap.py, on the MicroPython unix port:
#   micropython tls_heap_device.py MODE HOST PORT DEVICE_ID CA CERT KEY
# MODE: plain (no TLS), tls (the broker's certificate checked, no client certificate),
# mtls (the same plus the board's certificate and key), identity (mtls as the board program
# builds it: fleetwire.identity.Context from config.json's keys). Prints, counted from after
# the client's import:
#   HEAP_CONTEXT / HEAP_CONNECT  MicroPython's heap (gc.mem_alloc() after a collection) with
#                                the TLS context built / connected, subscribed, one QoS 1
#                                message delivered and the TLS session open
#   SYS_CONTEXT / SYS_CONNECT    the same in the C library's heap, where mbedTLS allocates
#                                on this port (bench/malloc_count.c, preloaded)
#   SYS_PEAK                     the most the C heap held during connect()
#   HANDSHAKE                    connect() in ms: TCP, TLS and CONNACK
import gc
import os
import sys
import time

mode, host, port, dev, ca, cert, key = sys.argv[1:8]
port = int(port)


def heap():
    gc.collect()
    return gc.mem_alloc()


def sysheap():
    v = os.getenv("FW_MALLOC")
    return [int(x) for x in v.split()] if v else [0, 0]


def read(path):
    with open(path, "rb") as f:
        return f.read()


from fleetwire import MQTTClient  # noqa: E402

base, sbase = heap(), sysheap()[0]
ctx = None
if mode in ("tls", "mtls"):
    import ssl

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.verify_mode = ssl.CERT_REQUIRED
    ctx.load_verify_locations(cadata=read(ca))
    if mode == "mtls":
        ctx.load_cert_chain(read(cert), read(key))
elif mode == "identity":
    from fleetwire.identity import Context

    ctx = Context({"broker": host, "tls_ca": ca, "tls_cert": cert, "tls_key": key})
print("HEAP_CONTEXT", heap() - base)
print("SYS_CONTEXT", sysheap()[0] - sbase)
c = MQTTClient(dev, host, port, keepalive=60, ssl=ctx)
c.set_callback(lambda t, m: None)
os.getenv("FW_MALLOC_RESET")
t0 = time.ticks_ms()
c.connect()
print("HANDSHAKE", time.ticks_diff(time.ticks_ms(), t0))
print("SYS_PEAK", sysheap()[1] - sbase)
c.subscribe("fleet/%s/cmd/#" % dev, 1)
c.publish("fleet/%s/telemetry" % dev, b"x" * 64, qos=1)
print("HEAP_CONNECT", heap() - base)
print("SYS_CONNECT", sysheap()[0] - sbase)
c.disconnect()

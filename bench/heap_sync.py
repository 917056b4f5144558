# bench/heap.py's programs with umqtt.simple's API (see heap_device.py for how they run):
#   umqtt: umqtt.simple.   fw: fleetwire's MQTTClient, the umqtt.simple-style program.
#   fw+FEATURE+...: with a RingStore on an emulated 256 KB flash partition (store), a
#   FileStore in the directory heap-fstore (filestore: the client makes it from the path),
#   reconnect=True (reconnect), a will (will), QoS 2 both ways (qos2), 8 subscriptions
#   (subs8), an unsubscribe (unsub), MQTT 5 (v5: fleetwire.v5.MQTTClient).
from heap_device import prog, feats, host, port, inbox, cb, start, step, ready


def main():
    flash = None
    if "store" in feats:
        from flashfile import FlashFile

        # a board's partition is flash, not heap: the emulated one is open before the start
        flash = FlashFile("heap-store.flash", 64, 4096)
    start()
    if prog == "umqtt":
        from umqtt.simple import MQTTClient
    elif "v5" in feats:
        from fleetwire.v5 import MQTTClient
    else:
        from fleetwire import MQTTClient

        if flash:
            from fleetwire.ring.store import RingStore
    step("import")
    kw = {}
    if flash:
        kw["store"] = RingStore(flash)
    if "filestore" in feats:
        kw["store"] = "heap-fstore"
    if "reconnect" in feats:
        kw["reconnect"] = True
    c = MQTTClient(b"heap-" + prog[:17].encode(), host, port, keepalive=60, **kw)
    kw = None
    c.set_callback(cb)
    step("construct")
    if "will" in feats:
        c.set_last_will(b"bench/will", b"gone", True, 1)
        step("will")
    c.connect()
    step("connect")
    q2 = "qos2" in feats
    c.subscribe(b"bench/in", 2 if q2 else 1)
    if "subs8" in feats:
        for i in range(1, 8):
            c.subscribe(b"bench/s%d" % i, i % 3 if q2 else i % 2)
    if "unsub" in feats:
        c.subscribe(b"bench/u", 0)
        c.unsubscribe(b"bench/u")
    step("subscribe")
    msg = b"x" * 64
    for i in range(100):
        c.publish(b"bench/out", msg, False, 2 if q2 and i % 2 else 1)
    step("publish")
    ready()
    while len(inbox) < 10:
        c.wait_msg()
    step("receive")
    c.disconnect()


main()
print("DONE")

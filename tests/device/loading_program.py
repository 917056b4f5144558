# Which of fleetwire's modules a program loads, step by step: a device program that runs
# one scenario against a broker and prints, after each step, the fleetwire modules loaded
# since the last one ("STEP name mod mod ..."). argv: host port scenario [tls_ca_der]
import sys

host, port, scenario = sys.argv[1], int(sys.argv[2]), sys.argv[3]
seen = set(k for k in sys.modules if k.startswith("fleetwire"))


def step(name):
    now = set(k for k in sys.modules if k.startswith("fleetwire"))
    print("STEP", name, " ".join(sorted(m[len("fleetwire.") :] for m in now - seen if m != "fleetwire")))
    seen.update(now)


from fleetwire import MQTTClient  # noqa: E402

step("import")
kw = {}
if scenario == "store":
    from fleetwire.ramstore import RamStore

    kw["store"] = RamStore(8192, 2048)
elif scenario == "reconnect":
    kw["reconnect"] = True
elif scenario == "drop":
    kw["drop_oldest"] = True
elif scenario == "tls":
    import ssl

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.verify_mode = ssl.CERT_REQUIRED
    with open(sys.argv[4], "rb") as f:
        ctx.load_verify_locations(cadata=f.read())
    kw["ssl"] = ctx
elif scenario == "crash":
    from fleetwire import crashrun

    crashrun.install("1.0.0", 1)
elif scenario == "v5":
    from fleetwire.v5 import MQTTClient
c = MQTTClient("loading-" + scenario, host, port, keepalive=30, **kw)
c.set_callback(lambda t, m: None)
step("construct")
if scenario == "commands":
    import fleetwire.cmd as cmd

    cmd.enable(c, "loading-commands")
    step("enable")
elif scenario == "desired":
    import fleetwire.desired as desired

    desired.enable(c, "loading-desired")
    step("enable")
if scenario == "will":
    c.set_last_will("loading/will", "gone")
c.connect(clean_session=scenario != "persistent")
step("connect")
c.subscribe("loading/" + scenario, 2 if scenario == "sub2" else 1)
step("subscribe")
c.publish("loading/" + scenario, b"m0", qos=0)
c.publish("loading/" + scenario, b"m1", qos=1)
step("publish")
c.check_msg()
c.publish("loading/" + scenario, b"m3", qos=0)
while c.wait_msg() & 0xF0 != 0x30:  # until a message (a PINGRESP or an ack may come first)
    pass
step("receive")
if scenario == "qos2":
    c.publish("loading/" + scenario, b"m2", qos=2)
    step("publish2")
elif scenario == "unsubscribe":
    c.unsubscribe("loading/" + scenario)
    step("unsubscribe")
elif scenario == "reconnect2":
    c.disconnect()
    c.connect()
    step("connect2")
c.disconnect()
step("disconnect")

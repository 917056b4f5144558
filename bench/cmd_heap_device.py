# bench/cmd_heap.py's device program: the heap fleetwire.cmd and fleetwire.desired hold over a
# connected client, on the MicroPython unix port (.mpy). argv: host port id what (cmd|desired|both)
# N. Prints "HEAP step bytes" lines; step "answered" after N commands (the journal full).
import gc
import sys

from fleetwire import MQTTClient

host, port, dev, what, n = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5])
c = MQTTClient(dev, host, port, keepalive=30)
c.set_callback(lambda t, m: None)
c.connect(clean_session=False)
c.subscribe("bench/none", 1)


def mem(step):
    gc.collect()
    print("HEAP", step, gc.mem_alloc())


mem("client")
cmds = st = None
if what in ("desired", "both"):
    import fleetwire.desired as desired

    st = desired.enable(c, dev)
    st.on("config", lambda v: None)
if what in ("cmd", "both"):
    import fleetwire.cmd as cmd

    cmds = cmd.enable(c, dev, callback=st.handle if st else None)
    ran = [0]

    def add(a):
        ran[0] += 1
        return a["a"] + a["b"]

    cmds.on("add", add)
mem("enabled")
print("ready")
while True:
    c.check_msg()
    if st is not None:
        st.step()
    if cmds is not None:
        cmds.step()
    if (st is None or st.doc["version"] >= n) and (cmds is None or ran[0] >= n) and not c.pending:
        break
mem("answered")
c.disconnect()

# A board that takes commands and desired state (fleetwire.cmd, fleetwire.desired) against a
# broker, on MicroPython or CPython: run in its own directory, its flash.
#   board_program.py HOST PORT ID [SECONDS [USER PASSWORD]] [v5]
# Handlers: "add" (a + b), "mark" (appends args["n"] to runs.txt: a run that happened),
# "fail" (raises), "size" (the length of args["blob"]), "stop" (ends the program once its
# answer is acknowledged). Desired state: the "config" section's changes append
# "<version> <period_s>" to applied.txt. Prints "ready" once subscribed; exits after SECONDS
# (default 60) or "stop".
import sys
import time

import fleetwire.cmd as cmd
import fleetwire.desired as desired

if sys.argv[-1] == "v5":  # fleetwire.v5's client: MQTT 5
    sys.argv.pop()
    from fleetwire.v5 import MQTTClient
else:
    from fleetwire import MQTTClient

host, port, dev = sys.argv[1], int(sys.argv[2]), sys.argv[3]
limit = int(sys.argv[4]) if len(sys.argv) > 4 else 60
login = sys.argv[5:7] if len(sys.argv) > 6 else (None, None)
c = MQTTClient(
    dev, host, port, login[0], login[1], keepalive=30, reconnect=True, backoff_min=0.05, backoff_max=0.2
)
st = desired.enable(c, dev)
# the other messages go to the state, with the pieces of a long one
cmds = cmd.enable(c, dev, callback=lambda t, m: st.handle(t, m, c.rest))
stop = []


def mark(args):
    with open("runs.txt", "a") as f:
        f.write("%d\n" % args["n"])
    return args["n"]


def fail(args):
    raise ValueError("asked to fail")


def config(v):
    with open("applied.txt", "a") as f:
        f.write("%d %s\n" % (st.doc["version"], (v or {}).get("period_s")))


cmds.on("add", lambda a: a["a"] + a["b"])
cmds.on("mark", mark)
cmds.on("fail", fail)
cmds.on("size", lambda a: len(a["blob"]))
cmds.on("stop", lambda a: stop.append(1) or "stopping")
st.on("config", config)
c.connect(clean_session=False)  # after enable() and on(): what waited at the broker comes now
c.subscribe(cmds.t_run, 1)
c.subscribe(st.t_des, 1)
print("ready")
t0 = time.time()
while time.time() - t0 < limit:
    c.loop(50)
    cmds.step()
    st.step()
    if stop and not c.pending:
        break
c.disconnect()
print("bye")

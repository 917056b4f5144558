# Commands and desired state: handlers by name, a versioned document; both kept on flash.
from fleetwire import MQTTClient
import fleetwire.cmd as cmd
import fleetwire.desired as desired

c = MQTTClient("sensor-17", "broker.local", keepalive=30, reconnect=True, store="store")
state = desired.enable(c, "sensor-17")  # state.json: the version applied survives a reset
cmds = cmd.enable(c, "sensor-17", callback=state.handle)  # cmd.json: the journal of ids run
period = [state.get("config", {}).get("period_s", 60)]  # in force from boot


def config(v):  # a section that changed, once per version, after it is on flash
    period[0] = (v or {}).get("period_s", 60)


cmds.on("add", lambda args: args["a"] + args["b"])  # its result is the answer
state.on("config", config)
c.connect(clean_session=False)  # after enable(): what waited at the broker comes now
c.subscribe(cmds.t_run, 1)
c.subscribe(state.t_des, 1)
while period[0] == 60:  # a device loops for ever; this example stops once configured
    c.loop(100)
    cmds.step()  # answers still due (after a reset, a full queue)
    state.step()  # the reported state, when it changed
while c.pending:
    c.loop(100)
print("period", period[0])

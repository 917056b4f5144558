# MQTT 5 for the device agent (agent.py): loaded by an "init" with "v5", so that the 3.1.1
# tests' agent holds none of it in its tight heap.
import sys


def init(cmd, kw, event, counts):
    # the class to make (its refusals reported as events), and MQTT 5's options into kw
    for k in ("session_expiry", "max_packet"):
        if k in cmd:
            kw[k] = cmd[k]
    if sys.argv[-1] == "asyncio":
        from fleetwire.aio5 import AsyncClient as K
    else:
        from fleetwire.v5 import MQTTClient as K
    counts["refused"] = 0

    class C(K):
        def on_refused(self, pid, code):
            event("refused", "refused: %d 0x%02x" % (pid, code))

    return C


got = []


def run(cmd, c, aw, drive):
    op = cmd["op"]
    if op == "v5_state":
        # what the broker's CONNACK set for this connection
        return {
            "session_expiry": c.session_expiry,
            "max_inflight": c.max_inflight,
            "keepalive": c.keepalive,
            "client_id": c.client_id.decode(),
            "max_packet": c._smax,
        }
    if op == "v5_sub":
        # a subscription the broker may refuse -> its code (SubscribeRefused.code)
        from fleetwire import SubscribeRefused

        try:
            return {"rc": aw(c.subscribe(cmd["topic"], cmd.get("qos", 0)))}
        except SubscribeRefused as e:
            return {"refused": e.code, "error": str(e)}
    if op == "v5_pub":
        # a message with properties: [[id, value], ...], a value an int, a str or a [name,
        # value] pair (a User Property)
        pairs = []
        for p, v in cmd["props"]:
            if type(v) is list:
                v = (v[0].encode(), v[1].encode())
            elif type(v) is str:
                v = v.encode()
            pairs.append((p, v))
        block = c.encode_props(pairs)
        q = cmd.get("qos", 0)
        if sys.argv[-1] == "asyncio":
            return {"pid": aw(c.publish(cmd["topic"], cmd["msg"], False, q, True, block))}
        return {"pid": c.publish(cmd["topic"], cmd["msg"], False, q, props=block)}
    if op == "v5_watch":
        # from now on, each message's properties too: [topic, msg, [[id, value], ...]] (a
        # message longer than max_packet joined from its pieces)
        part = []

        def cb(topic, msg):
            if c.rest or part:
                part.append(msg)
                if c.rest:
                    return
                msg = b"".join(part)
                del part[:]
            props = []
            for p, v in c.properties():
                if type(v) is tuple:
                    v = [v[0].decode(), v[1].decode()]
                elif type(v) is bytes:
                    v = v.decode()
                props.append([p, v])
            got.append([topic.decode(), msg.decode(), props])

        c.set_callback(cb)
        return {}
    if op == "v5_got":
        for _ in range(cmd.get("ms", 5000) // 20):
            if len(got) >= cmd.get("n", 1):
                break
            drive(20)
        r = got[:]
        del got[:]
        return {"msgs": r}
    raise ValueError("unknown op " + op)

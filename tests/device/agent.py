# A device program driven over stdin/stdout, one JSON object per line, so the
# host tests can script the real client on MicroPython and on CPython alike.
# Each command {"op": ...} gets one reply {"ok": true, ...} or {"ok": false, "error": "..."}.
# argv[1] "asyncio" drives fleetwire.aio.AsyncClient instead of MQTTClient: the same
# commands, so a test written once runs against both fronts. Between commands the
# asyncio client's tasks wait, as the blocking client does between loop() calls.
import sys
import json
import gc
from fleetwire import MQTTClient, QueueFull

MP = sys.implementation.name == "micropython"
AIO = sys.argv[-1] == "asyncio"
c = None
if AIO:
    import asyncio
    from fleetwire.aio import AsyncClient

    _loop = asyncio.new_event_loop()
    if not MP:
        asyncio.set_event_loop(_loop)

    def aw(x):
        # the asyncio front's calls are awaited: run the loop until this one is done
        return _loop.run_until_complete(x)

    async def nap(s):
        await asyncio.sleep(s)  # (a task of its own: MicroPython's sleep() is no coroutine)

    def drive(ms):
        # the client's tasks run for ms; a reconnect that stopped for good is raised, as
        # MQTTClient.loop() raises it
        aw(nap(ms / 1000))
        if c.fatal is not None:
            raise c.fatal

    def pub(topic, msg, retain, qos, block):
        return aw(c.publish(topic, msg, retain, qos, block))

else:

    def aw(x):
        return x

    def drive(ms):
        c.loop(ms)

    def pub(topic, msg, retain, qos, block):
        return c.publish(topic, msg, retain, qos, block=block)


v = None
inbox = []
events = []  # the last few events, as text (bounded: a long sweep must not fill the heap)
counts = {"lost": 0, "connected": 0, "retry": 0, "discarded": 0}


def event(kind, text):
    counts[kind] += 1
    events.append(text)
    if len(events) > 4:
        events.pop(0)


fail_next = [0]  # messages the callback refuses (raises on), for tests of a failing application


part = []  # the pieces of a message longer than max_packet, until its last one


def cb(topic, msg):
    if fail_next[0]:
        fail_next[0] -= 1
        raise RuntimeError("the application failed on " + msg.decode())
    if c.rest or part:
        part.append(msg)
        if c.rest:
            return
        msg = b"".join(part)
        inbox.append([topic.decode(), msg.decode(), c.qos, c.retained, len(part)])
        del part[:]
        return
    inbox.append([topic.decode(), msg.decode(), c.qos, c.retained])


def ssl_context(cmd):
    import ssl

    if MP:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.verify_mode = ssl.CERT_REQUIRED
        with open(cmd["ca_der"], "rb") as f:
            ctx.load_verify_locations(cadata=f.read())
        return ctx
    return ssl.create_default_context(cafile=cmd["ca_pem"])


def run(cmd):
    global c
    op = cmd["op"]
    if op == "init":
        kw = {}
        for k in (
            "max_inflight",
            "queue_size",
            "max_packet",
            "max_subscriptions",
            "reconnect",
            "backoff_min",
            "backoff_max",
            "takeover_kicks",
            "drop_oldest",
        ):
            if k in cmd:
                kw[k] = cmd[k]
        if "io_timeout" in cmd:  # the client's timeout (the host side's is its own)
            kw["timeout"] = cmd["io_timeout"]
        c = None  # a client made anew: the old one goes first (a tight heap holds one)
        gc.collect()
        K = AsyncClient if AIO else MQTTClient
        if "v5" in cmd:  # MQTT 5 (agent_v5.py): its client, options and events; none of it here,
            from agent_v5 import init  # where each line is bytecode in the 80 KB heap

            K = init(cmd, kw, event, counts)
        c = K(
            cmd["id"],
            cmd["host"],
            cmd["port"],
            cmd.get("user"),
            cmd.get("password"),
            cmd.get("keepalive", 0),
            ssl_context(cmd) if cmd.get("tls") else None,
            **kw,
        )
        c.set_callback(cb)
        c.on_disconnect = lambda reason: event("lost", "lost: %s" % reason)
        c.on_connect = lambda present: event("connected", "connected: %d" % present)
        c.on_reconnect = lambda n, ms: event("retry", "retry %d in %d ms" % (n, ms))
        c.on_discarded = lambda t, m, q: event("discarded", "discarded: %s" % m.decode())
        return {}
    if op == "will":
        c.set_last_will(cmd["topic"], cmd["msg"], cmd.get("retain", False), cmd.get("qos", 0))
        return {}
    if op == "connect":
        return {"present": aw(c.connect(cmd.get("clean", True)))}
    if op == "sub":
        return {"rc": aw(c.subscribe(cmd["topic"], cmd.get("qos", 0)))}
    if op == "unsub":
        aw(c.unsubscribe(cmd["topic"]))
        return {}
    if op == "pub":
        block = cmd.get("block", True)
        while True:
            try:
                return {
                    "pid": pub(cmd["topic"], cmd["msg"], cmd.get("retain", False), cmd.get("qos", 0), block)
                }
            except QueueFull:
                if block or not cmd.get("wait_room", True):
                    raise
                drive(20)  # let acknowledgements make room, as an application would
    if op == "recv":
        # Loop until n messages are in, or the time is up; hand them over. With
        # "tail": go on until connected and no packet came for tail ms (the
        # rest of a QoS 2 flow, or a reconnect, is done).
        n = cmd.get("n", 1)
        for _ in range(cmd.get("ms", 5000) // 20):
            if len(inbox) >= n:
                break
            drive(20)
        tail = cmd.get("tail", 0)
        if tail:
            for _ in range(cmd.get("ms", 5000) // 10):
                h = c._handled
                drive(tail)
                if h == c._handled and c.is_connected():
                    break
        got = inbox[:]
        del inbox[:]
        return {"msgs": got}
    if op == "wait":
        # umqtt's way: wait_msg() until n messages are in
        while len(inbox) < cmd.get("n", 1):
            c.wait_msg()
        got = inbox[:]
        del inbox[:]
        return {"msgs": got}
    if op == "loop":
        drive(0)
        for _ in range(cmd.get("ms", 100) // 20):
            drive(20)
        return {"pending": c.pending}
    if op == "settle":
        # Loop (reconnecting as needed) until nothing is pending and the link is up.
        for _ in range(cmd.get("ms", 10000) // 10):
            drive(10)
            if not c.pending and c.is_connected():
                break
        got = inbox[:]
        del inbox[:]
        return {"pending": c.pending, "connected": c.is_connected(), "msgs": got}
    if op == "until_lost":
        # Loop until the client notices the link is gone -> ms it took.
        try:
            from time import ticks_ms, ticks_diff
        except ImportError:
            import time

            ticks_ms = lambda: int(time.monotonic() * 1000)  # noqa: E731
            ticks_diff = lambda a, b: a - b  # noqa: E731
        n = counts["lost"]
        t0 = ticks_ms()
        while counts["lost"] == n and ticks_diff(ticks_ms(), t0) < cmd.get("ms", 10000):
            drive(10)
        return {"ms": ticks_diff(ticks_ms(), t0), "lost": counts["lost"] > n, "events": events[:]}
    if op == "burst":
        # n QoS 0 publishes in a tight loop, umqtt style (blocking calls, nothing else),
        # with a small socket send buffer so a slow link pushes back within a few KB
        c.sock.setsockopt(1, 7, cmd.get("sndbuf", 4096))  # SOL_SOCKET, SO_SNDBUF (Linux)
        body = "x" * cmd.get("size", 1000)
        for i in range(cmd["n"]):
            try:
                c.publish(cmd["topic"], "%05d" % i + body)
            except Exception as e:  # the index reached, for a test of a stalled link
                return {"pending": c.pending, "sent": i, "error": "%s: %s" % (type(e).__name__, e)}
        return {"pending": c.pending, "sent": cmd["n"], "error": None}
    if op == "fill":
        # Publish numbered messages without blocking until the queue says it is full.
        n = 0
        try:
            while n < cmd.get("max", 1000):
                pub(cmd["topic"], "%s%04d" % (cmd.get("prefix", ""), n), False, cmd.get("qos", 1), False)
                n += 1
        except QueueFull as e:
            return {"accepted": n, "full": "%s: %s" % (type(e).__name__, e)}
        return {"accepted": n, "full": None}
    if op == "vitals":
        # The vitals agent on this client: boot it, publish n records, loop them out.
        global v
        from fleetwire.vitals import Vitals
        from fleetwire import board

        board.emulate["reset_cause"] = cmd.get("cause", "power_on")
        board._reset[0] = lambda: None  # the test restarts the process itself
        v = Vitals(c, cmd["device_id"], cmd.get("fw", "1.0.0"), cmd.get("period", 60), state=cmd["state"])
        return {"boot_id": v.boot()}
    if op == "vitals_pub":
        for _ in range(cmd.get("n", 1)):
            v.publish()
            c.loop(0)
        return {"pending": c.pending}
    if op == "vitals_alloc":
        # bytes allocated by formatting one record, in steady state
        # allocations of n records less those of the same code with none
        res = []
        for n in (0, cmd.get("n", 100)):
            for _ in range(20):  # warm up: first calls may settle one-time allocations
                v.format()
            gc.collect()
            a = gc.mem_alloc() if MP else 0
            for _ in range(n):
                v.format()
            res.append((gc.mem_alloc() if MP else 0) - a)
        return {"alloc": res[1] - res[0], "record": bytes(v.make()).decode()}
    if op == "pub_alloc":
        # bytes allocated by n publishes of 64 B in steady state (QoS 1 pipelined, waiting
        # for room as an application would), less those of the same loop without publishing;
        # a round of 20 in between warms up (first calls may settle one-time allocations)
        qos = cmd["qos"]
        topic = cmd["topic"].encode()
        payload = b"x" * 64
        res = []
        for n in (0, 20, cmd.get("n", 100)):
            gc.collect()
            gc.disable()
            a = gc.mem_alloc() if MP else 0
            for _ in range(n):
                while c.pending >= 8:
                    c.loop(5)
                c.publish(topic, payload, False, qos, block=False)
                c.check_msg()
            while c.pending or c.inflight:
                c.loop(5)
            res.append((gc.mem_alloc() if MP else 0) - a)
            gc.enable()
        return {"alloc": res[2] - res[0]}
    if op == "vitals_reset":
        v.deliberate_reset()
        return {}
    if op == "events":
        got = events[:]
        del events[:]
        return {"events": got, "counts": counts}
    if op == "disconnect":
        aw(c.disconnect())
        return {}
    if op == "fail_next":
        fail_next[0] = cmd.get("n", 1)
        return {}
    if op == "wait_msg":
        # umqtt's blocking read: one packet handled -> its first byte, and what it delivered
        op = c.wait_msg()
        got = inbox[:]
        del inbox[:]
        return {"op": op, "msgs": got, "connected": c.is_connected()}
    if op == "check_msg":
        op = c.check_msg()
        got = inbox[:]
        del inbox[:]
        return {"op": op, "msgs": got}
    if op[:3] == "v5_":
        from agent_v5 import run as v5_run

        return v5_run(cmd, c, aw, drive)
    if op[:6] == "crash_":
        # crash records, in a module of their own: each line here is bytecode in the tests'
        # 80 KB heap, where a tight one (the asyncio front's keepalive text) has ~1 KB to spare
        from agent_crash import run as crash_run

        return crash_run(cmd, c, drive)
    if op == "state":
        return {"connected": c.is_connected(), "pending": c.pending, "events": events}
    if op == "mem":
        gc.collect()
        return {"alloc": gc.mem_alloc() if MP else 0, "mods": sorted(sys.modules)}
    raise ValueError("unknown op " + op)


def main():
    while True:
        line = sys.stdin.readline()
        if not line:
            break
        cmd = json.loads(line)
        try:
            reply = run(cmd)
            reply["ok"] = True
        except Exception as e:
            reply = {"ok": False, "error": "%s: %s" % (type(e).__name__, e)}
        json.dump(reply, sys.stdout)  # written as it is encoded: no copy of a long reply
        sys.stdout.write("\n")
        reply = cmd = line = None  # so the next command's "mem" sees only the client
        if hasattr(sys.stdout, "flush"):
            sys.stdout.flush()


main()

# fleetwire.cmd: commands over MQTT, loaded only by a program that takes them
# (fleetwire.runner with "commands": true in config.json, or cmd.enable(client, ...)).
#
# Topics (inside the board's ACL, `fleetwire broker-config`: it reads fleet/<id>/cmd/#, writes
# one level under fleet/<id>/):
#   fleet/<id>/cmd/run  operator -> board, QoS 1, not retained, on the board's persistent
#                       session (so a command sent while it is away waits at the broker):
#                       {"id": "<1-64 chars>", "name": "...", "args": ..., "deadline": <epoch s> | null}
#   fleet/<id>/answer   board -> operator, QoS 1: {"id", "status": "ok" | "error" | "expired" |
#                       "interrupted", "result": ..., "error": "<text>" | null}
# On MQTT 5 (enable() with fleetwire.v5's client) an answer carries the command's id as its
# Correlation Data, so a requester that sent the id as Correlation Data and fleet/<id>/answer
# as Response Topic (fleetwire's operator on MQTT 5 does) matches it as MQTT 5 says; the id
# stays in the payload, so a 3.1.1 operator reads either. The board answers on its own answer
# topic whatever Response Topic came: its ACL lets it write nowhere else.
#
# Exactly once. The journal (a small JSON file, replaced whole: write, rename, atomic on
# LittleFS) holds the open commands, each [id, state, answer]: 0 running, 1 answered (the
# answer kept until its PUBACK); and the ids done, the last `keep` of them. A command is
# journalled as running before its handler runs, all of it in the client's callback, before
# the command's PUBACK is written: a link drop or a power cut redelivers it, and the journal
# says it ran. A cut while a handler ran leaves "running": after the reboot the command is
# answered "interrupted", never run again. An answer whose PUBACK had not come is sent again
# after a reboot (the host counts one per id). `keep` done ids are more than the broker can
# redeliver (those whose PUBACK was not yet written: at most the client's 8 acks due).
import json
import time

_OFF = 946684800 if time.gmtime(0)[0] == 2000 else 0  # ports whose epoch is 2000
_SET = 1577836800  # a clock before 2020 is not set: no deadline can be judged by it


def now():
    return time.time() + _OFF


def _text(e):
    return "%s: %s" % (type(e).__name__, e)


class Commands:
    """Commands(device_id, send, journal="cmd.json", keep=16, max_packet=1024, clock=None).

    on(name, fn) registers a handler: fn(args) -> a result JSON can write; an exception it
    raises is the answer's error. handle(topic, msg, rest=0) takes a message or a piece of one
    longer than max_packet (rest: client.rest) (-> True if it was this board's command); a
    long one is joined on flash (journal + ".in") and run, and one this heap or flash has no
    room for is answered with an error.
    send(topic, payload) publishes an answer at QoS 1 (-> packet id); delivered(pid) says an
    answer arrived; step() sends the answers still due."""

    p = None  # fleetwire.pieces.Pieces, from the first command longer than max_packet

    def __init__(self, device_id, send, journal="cmd.json", keep=16, max_packet=1024, clock=None):
        self.t_run = ("fleet/%s/cmd/run" % device_id).encode()
        self.t_ans = ("fleet/%s/answer" % device_id).encode()
        self.send = send
        self.h = {}
        self.path = journal
        self.keep = keep
        self.room = max_packet - len(self.t_ans) - 8  # what an answer may take
        self.clock = clock or now
        self.out = {}  # packet id -> the id of the answer it carries
        try:
            with open(journal) as f:
                self.j, self.d = json.load(f)
        except (OSError, ValueError):
            self.j, self.d = [], []  # open: [id, 0 running | 1 answered, answer]; done: ids
        cut = 0
        for e in self.j:
            if e[1] == 0:  # the power failed while it ran
                e[1] = 1
                e[2] = self._ans(e[0], "interrupted", None, "the board restarted while it ran")
                cut = 1
        if cut:
            self.save()

    def on(self, name, fn):
        self.h[name] = fn

    def save(self):
        import os

        t = self.path + ".tmp"
        with open(t, "w") as f:
            json.dump((self.j, self.d), f)
        os.rename(t, self.path)

    def _ans(self, cid, status, result, error):
        a = json.dumps({"id": cid, "status": status, "result": result, "error": error})
        if len(a) > self.room:
            a = json.dumps(
                {
                    "id": cid,
                    "status": "error",
                    "result": None,
                    "error": "answer of %d bytes over max_packet" % len(a),
                }
            )
        return a

    def handle(self, topic, msg, rest=0):
        """A message the client received (or a piece: rest, client.rest, bytes of it still to
        come) -> True if it was this board's command."""
        if topic != self.t_run:
            return False
        try:
            if rest or self.p:
                if not self.p:
                    from .pieces import Pieces

                    self.p = Pieces(self.path + ".in")
                c = self.p.feed(msg, rest)
                if rest:
                    return True
            else:
                c = json.loads(bytes(msg))
            cid = c["id"]
            if not isinstance(cid, str) or not 0 < len(cid) <= 64:
                raise ValueError("id must be 1 to 64 characters")
        except (MemoryError, OSError) as e:  # no room on this heap or flash: answered, it goes on
            p = self.p
            h = p.head if p and p.t > len(msg) else bytes(msg[:128])
            w = "in the heap" if isinstance(e, MemoryError) else "on flash"
            return self._refuse(
                h, "no room %s for a command of %d bytes: %s" % (w, p.t if p else len(msg), _text(e))
            )
        except (ValueError, KeyError, TypeError) as e:
            print("cmd: a command without a usable id dropped:", _text(e))
            return True
        if cid in self.d:
            return True  # a repeat: it ran once
        for e in self.j:
            if e[0] == cid:
                return True
        e = [cid, 0, None]
        self.j.append(e)
        d = c.get("deadline")
        t = self.clock()
        if d is not None and t >= _SET and t > d:
            a = self._ans(cid, "expired", None, "deadline %s passed %d s ago" % (d, t - d))
        else:
            fn = self.h.get(c.get("name"))
            if fn is None:
                a = self._ans(cid, "error", None, "no command %r on this board" % c.get("name"))
            else:
                self.save()  # running: a cut from here on answers "interrupted"
                try:
                    a = self._ans(cid, "ok", fn(c.get("args")), None)
                except Exception as x:  # noqa: BLE001 - the handler's error is the answer
                    a = self._ans(cid, "error", None, _text(x))
        e[1] = 1
        e[2] = a
        self.save()
        self._send(e)
        return True

    def _refuse(self, h, why):
        # a command not run for want of room: answered, if its id is among its first bytes h
        i = h.find(b'"id"')
        j = h.find(b'"', h.find(b":", i + 4) + 1)
        k = h.find(b'"', j + 1)
        cid = h[j + 1 : k].decode() if -1 < i < j < k <= j + 65 else None
        if cid is None or cid in self.d or any(e[0] == cid for e in self.j):
            print("cmd: dropped:", why)
            return True
        e = [cid, 1, self._ans(cid, "error", None, why)]
        self.j.append(e)
        self.save()
        self._send(e)
        return True

    def _send(self, e):
        try:
            pid = self.send(self.t_ans, e[2])
        except Exception as x:  # noqa: BLE001 - a full queue, no link: step() sends it later
            print("cmd: answer waits:", _text(x))
            return
        self.out[pid] = e[0]

    def delivered(self, pid):
        cid = self.out.pop(pid, None)
        if cid is None:
            return
        for e in self.j:
            if e[0] == cid:
                self.j.remove(e)
                self.d.append(cid)
                if len(self.d) > self.keep:
                    self.d.pop(0)  # the oldest done id goes first
                self.save()
                return

    def step(self):
        """From the main loop: send the answers due (after a reboot, or a full queue)."""
        for e in self.j:
            if e[1] == 1 and e[0] not in self.out.values():
                self._send(e)


def enable(client, device_id, callback=None, **kw):
    """Commands for a program with an MQTTClient: subscribe to fleet/<id>/cmd/run (QoS 1) and
    hand those messages to a Commands, the others to `callback` (the program's own).
    -> the Commands; register handlers with on(name, fn), call step() from the main loop.
    Call it and on() before connect(clean_session=False): the commands that waited at the broker
    come right after the CONNACK. Then client.subscribe(cmds.t_run, 1) (enable() subscribes
    when the client is already connected)."""
    v5 = hasattr(client, "encode_props")
    kw.setdefault("max_packet", client.max_packet - 68 * v5)  # (room for the Correlation Data)

    def send(t, p):
        if v5:  # MQTT 5: the answer's Correlation Data is its id
            cd = json.loads(p)["id"].encode()
            return client.publish(t, p, False, 1, block=False, props=client.encode_props(((9, cd),)))
        return client.publish(t, p, False, 1, block=False)

    c = Commands(device_id, send, **kw)
    prev = client.on_delivered

    def on_delivered(pid):
        c.delivered(pid)
        if prev:
            prev(pid)

    def on_msg(topic, msg):
        if not c.handle(topic, msg, client.rest) and callback is not None:
            callback(topic, msg)

    client.on_delivered = on_delivered
    client.set_callback(on_msg)
    if client.is_connected():
        client.subscribe(c.t_run, 1)
    return c

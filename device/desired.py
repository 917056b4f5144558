# fleetwire.desired: desired and reported state, loaded only by a program that uses it
# (fleetwire.runner with "desired": true in config.json, or desired.enable(client, ...)).
#
# Topics (inside the board's ACL, as fleetwire.cmd's):
#   fleet/<id>/cmd/desired  operator -> board, QoS 1, retained: {"version": <int>, "state":
#                           {section: value, ...}}, the whole document; the retained copy
#                           reaches the board at every subscribe, so it converges after any outage
#   fleet/<id>/reported     board -> operator, QoS 1, retained: {"version": <applied>, "state":
#                           {...} (null when the report would not fit max_packet), "error":
#                           "<text>" | null}
#
# The board keeps the document it applied in state.json (replaced whole: write, rename). A
# desired version at or below the applied one is not applied (an older one never, the same one
# never twice). A newer one is written to flash first, then each section that changed is
# handed to its handler: a power cut before the write leaves the old version (the retained
# document comes again), after it the new one, which a program reads at boot (get()); no
# handler runs twice for one version.
import json


class State:
    """State(device_id, send, path="state.json").

    on(section, fn): fn(value) applies a section that changed (value None: removed); an
    exception it raises is reported. get(section, default) reads the applied document.
    handle(topic, msg, rest=0) takes a message or a piece of one longer than max_packet (rest:
    client.rest) (-> True if it was this board's desired state); a long one is joined on flash
    (path + ".in"), and one this heap or flash has no room for is reported as an error.
    send(topic, payload) publishes the reported state (QoS 1, retained)."""

    p = None  # fleetwire.pieces.Pieces, from the first document longer than max_packet

    def __init__(self, device_id, send, path="state.json"):
        self.t_des = ("fleet/%s/cmd/desired" % device_id).encode()
        self.t_rep = ("fleet/%s/reported" % device_id).encode()
        self.send = send
        self.path = path
        self.h = {}
        self.error = None
        self.due = False  # a report to send (step())
        try:
            with open(path) as f:
                self.doc = json.load(f)
        except (OSError, ValueError):
            self.doc = {"version": 0, "state": {}}

    def get(self, section, default=None):
        return self.doc["state"].get(section, default)

    def on(self, section, fn):
        self.h[section] = fn

    def handle(self, topic, msg, rest=0):
        if topic != self.t_des:
            return False
        if not (msg or rest):  # the retained document withdrawn: the board keeps what it applied
            return True
        try:
            if rest or self.p:
                if not self.p:
                    from .pieces import Pieces

                    self.p = Pieces(self.path + ".in")
                d = self.p.feed(msg, rest)
                if rest:
                    return True
            else:
                d = json.loads(bytes(msg))
            v = d["version"]
            new = d["state"]
            if not isinstance(v, int) or isinstance(v, bool) or not isinstance(new, dict):
                raise ValueError("version must be an integer, state an object")
        except (ValueError, KeyError, TypeError, MemoryError, OSError) as e:  # it goes on, and says why
            self.error = "desired state of %d bytes unreadable: %s: %s" % (
                self.p.t if self.p else len(msg),
                type(e).__name__,
                e,
            )
            self.due = True
            return True
        if v <= self.doc["version"]:
            self.due = self.due or v < self.doc["version"]  # say which version holds
            return True
        old = self.doc["state"]
        self.doc = {"version": v, "state": new}
        self.save()  # on flash before any handler runs
        self.error = None
        for k in set(old) | set(new):
            if old.get(k) != new.get(k):
                fn = self.h.get(k)
                if fn is not None:
                    try:
                        fn(new.get(k))
                    except Exception as e:  # noqa: BLE001 - reported, the rest still applied
                        self.error = "%s: %s: %s" % (k, type(e).__name__, e)
        self.due = True
        return True

    def save(self):
        import os

        t = self.path + ".tmp"
        with open(t, "w") as f:
            json.dump(self.doc, f)
        os.rename(t, self.path)

    def step(self):
        """From the main loop: report the applied version when it changed (or was asked)."""
        if not self.due:
            return
        d = self.doc
        r = {"version": d["version"], "state": d["state"], "error": self.error}
        for _ in (0, 1):
            try:
                self.send(self.t_rep, json.dumps(r))
                self.due = False
                return
            except (ValueError, MemoryError):  # longer than max_packet, or than the heap can
                r["state"] = None  # write: the version and error are the report
            except Exception as e:  # noqa: BLE001 - a full queue: the next step tries again
                print("desired: report waits:", e)
                return


def enable(client, device_id, callback=None, **kw):
    """Desired state for a program with an MQTTClient: subscribe to fleet/<id>/cmd/desired
    (QoS 1) and hand those messages to a State, the others to `callback`. -> the State;
    register handlers with on(section, fn), call step() from the main loop. Subscribes when the
    client is connected; before connect(), subscribe to s.t_des (QoS 1) once connected."""
    s = State(device_id, lambda t, p: client.publish(t, p, True, 1, block=False), **kw)
    s.due = True  # say what this board holds, once connected

    def on_msg(topic, msg):
        if not s.handle(topic, msg, client.rest) and callback is not None:
            callback(topic, msg)

    client.set_callback(on_msg)
    if client.is_connected():
        client.subscribe(s.t_des, 1)
    return s

"""The operator's side of commands and desired state (`fleetwire cmd`, `fleetwire state`).

Topics and payloads (MQTT 3.1.1; the boards' modules fleetwire.cmd and fleetwire.desired):

    fleet/<id>/cmd/run       operator -> board, QoS 1: {"id", "name", "args", "deadline"}
    fleet/<id>/answer        board -> operator, QoS 1: {"id", "status", "result", "error"}
    fleet/<id>/cmd/desired   operator -> board, QoS 1, retained: {"version", "state"}
    fleet/<id>/reported      board -> operator, QoS 1, retained: {"version", "state", "error"}

A command's id is new for every board it goes to; the first answer per id counts (a board
may send one again after a power cut). Boards use a persistent session, so a command sent
while a board is away waits at the broker until its deadline; one that arrives later is
answered "expired" and not run.

With landing=DIR it lands what it sends beside the collector's answers and reported states, in
DIR/_commands/date=YYYY-MM-DD/<its client id>.ndjson, a line an event ({"rx_ts", "device_id",
"kind", "body"}): "sent" (id, name, deadline) per board a command went to, "desired" (version,
change: one set_desired() call is one change) per board: the report's commands and convergence
tables (fleetwire.host.analytics.commands) are made from them.
"""

import datetime
import json
import os
import threading
import time
import uuid

from fleetwire.host.identity.login import connect_and_wait, disconnect, paho_client

RUN = "fleet/%s/cmd/run"
ANSWER = "fleet/%s/answer"
DESIRED = "fleet/%s/cmd/desired"
REPORTED = "fleet/%s/reported"
STATUSES = ("ok", "error", "expired", "interrupted")


class CommandError(ValueError):
    """A command or a desired state that cannot be sent (bad name, arguments, selection)."""


class NotConnected(ConnectionError):
    """The operator could not reach or log in to the broker; the text says why."""


def _board(topic, tail):
    # fleet/<id>/<tail> -> <id>, or None
    parts = topic.split("/")
    if len(parts) == 2 + len(tail.split("/")) and parts[0] == "fleet" and "/".join(parts[2:]) == tail:
        return parts[1]
    return None


def select(ids, groups=None, group=None, share=None, salt=""):
    """Boards from a list: those of `group` ({id: group}), then a stable `share` (per cent,
    by the SHA-256 of salt and id, so the same share is the same boards) -> [ids]."""
    import hashlib

    if group is not None:
        ids = [d for d in ids if (groups or {}).get(d) == group]
        if not ids:
            raise CommandError("no board is in group %r" % group)
    if share is not None:
        if not 0 < share <= 100:
            raise CommandError("a share is more than 0 and at most 100 per cent, not %s" % share)
        ordered = sorted(ids, key=lambda d: hashlib.sha256((salt + "/" + d).encode()).digest())
        ids = sorted(ordered[: max(1, round(len(ordered) * share / 100.0))])
    return list(ids)


class Operator:
    """Operator(host, port, user=None, password=None, tls=(None, None, None), client_id=None,
    landing=None, version=4).

    start() connects (NotConnected says why it could not); then send() and wait() (or run()),
    desired(), reported(), set_desired() and drift(). Use it in a with block. landing: a
    landing zone to land what it sends in (the module's docstring). version=5: MQTT 5, each
    command sent with Response Topic fleet/<id>/answer and its id as Correlation Data; an
    answer is matched by its Correlation Data (.correlated counts those that came with it)."""

    def __init__(
        self,
        host,
        port,
        user=None,
        password=None,
        tls=(None, None, None),
        client_id=None,
        landing=None,
        version=4,
    ):
        self.host, self.port = host, port
        self.id = client_id or "op-%s" % uuid.uuid4().hex[:10]
        self.landing = landing
        self.version = version
        self.correlated = 0
        self.c = paho_client(self.id, True, user, password, tls, version)
        self.c.on_connect = self._on_connect
        self.c.on_subscribe = self._on_subscribe
        self.c.on_message = self._on_message
        self.lock = threading.Condition()
        self.answers = {}  # command id -> (board, answer dict, received at)
        self.desired_docs = {}  # board -> its retained desired document
        self.reported_docs = {}  # board -> its retained reported document
        self._answered = threading.Event()
        self._err = None

    # ---- the connection

    def _on_connect(self, client, userdata, flags, rc, props):
        if rc.is_failure:
            self._err = "the broker refused the operator: %s" % rc
            self._answered.set()
            return
        client.subscribe([(ANSWER % "+", 1), (REPORTED % "+", 1), (DESIRED % "+", 1)])

    def _on_subscribe(self, client, userdata, mid, codes, props):
        self._answered.set()

    def _on_message(self, client, userdata, m):
        t = m.topic
        try:
            doc = json.loads(m.payload) if m.payload else None
        except ValueError:
            return  # not ours to judge: the collector quarantines what is not JSON
        with self.lock:
            b = _board(t, "answer")
            if b is not None and isinstance(doc, dict):
                # MQTT 5: the Correlation Data names the command answered; else the payload's id
                cd = getattr(getattr(m, "properties", None), "CorrelationData", None)
                self.correlated += cd is not None
                cid = cd.decode("utf-8", "replace") if cd is not None else doc.get("id")
                if cid is not None:
                    self.answers.setdefault(cid, (b, doc, time.time()))
            elif _board(t, "reported") is not None:
                self.reported_docs[_board(t, "reported")] = doc
            elif _board(t, "cmd/desired") is not None:
                self.desired_docs[_board(t, "cmd/desired")] = doc
            self.lock.notify_all()

    def start(self, timeout=10):
        why = connect_and_wait(self.c, self.host, self.port, self._answered, lambda: self._err, timeout)
        if why:
            disconnect(self.c)
            raise NotConnected(why)
        time.sleep(0.2)  # the retained documents follow the SUBACK
        return self

    def stop(self):
        disconnect(self.c)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def _publish(self, topic, payload, retain=False, props=None):
        info = self.c.publish(topic, payload, qos=1, retain=retain, properties=props)
        info.wait_for_publish(30)

    def _request(self, board, cid):
        # MQTT 5's request/response properties of a command (None on 3.1.1)
        if self.version != 5:
            return None
        from paho.mqtt.packettypes import PacketTypes
        from paho.mqtt.properties import Properties

        p = Properties(PacketTypes.PUBLISH)
        p.ResponseTopic = ANSWER % board
        p.CorrelationData = cid.encode()
        return p

    def _land(self, kind, events):
        """Append [(device_id, body)] as `kind` events to the landing zone (when there is one)."""
        if not self.landing or not events:
            return
        now = int(time.time() * 1000)
        day = datetime.datetime.fromtimestamp(now / 1000, datetime.timezone.utc).strftime("date=%Y-%m-%d")
        d = os.path.join(self.landing, "_commands", day)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "%s.ndjson" % self.id), "a", encoding="utf-8") as f:
            for device, body in events:
                line = {"rx_ts": now, "device_id": device, "kind": kind, "body": body}
                f.write(json.dumps(line, separators=(",", ":")) + "\n")

    # ---- commands

    def send(self, boards, name, args=None, deadline_s=None):
        """Send command `name` to each board -> {command id: board}. deadline_s: seconds from
        now after which a board answers "expired" instead of running it (None: no deadline)."""
        if not isinstance(name, str) or not name:
            raise CommandError("a command needs a name")
        try:
            json.dumps(args)
        except (TypeError, ValueError) as e:
            raise CommandError("the arguments must be JSON: %s" % e)
        deadline = None if deadline_s is None else int(time.time() + deadline_s)
        sent = {}
        for b in boards:
            cid = uuid.uuid4().hex[:12]  # 48 random bits: 32 bytes of a board's heap each in its journal
            body = {"id": cid, "name": name, "args": args, "deadline": deadline}
            self._publish(RUN % b, json.dumps(body, separators=(",", ":")), props=self._request(b, cid))
            sent[cid] = b
        self._land("sent", [(b, {"id": i, "name": name, "deadline": deadline}) for i, b in sent.items()])
        return sent

    def wait(self, sent, timeout, progress=None):
        """Wait until every command of `sent` was answered or `timeout` s passed -> {board:
        answer} (a board sent several: its last). progress(answered, total) counts commands."""
        end = time.time() + timeout
        seen = -1
        with self.lock:
            while True:
                done = [i for i in sent if i in self.answers]  # by command: a board may have several
                if progress and len(done) != seen:
                    progress(len(done), len(sent))
                    seen = len(done)
                left = end - time.time()
                if len(done) == len(sent) or left <= 0:
                    return {sent[i]: self.answers[i][1] for i in done}
                self.lock.wait(min(left, 0.5))

    def run(self, boards, name, args=None, timeout=60, deadline_s=None, progress=None):
        return self.wait(self.send(boards, name, args, deadline_s), timeout, progress)

    # ---- desired state

    def desired(self, board):
        with self.lock:
            return self.desired_docs.get(board)

    def reported(self, board):
        with self.lock:
            return self.reported_docs.get(board)

    def set_desired(self, boards, changes):
        """Change sections of each board's desired state (a section None removes it) -> {board:
        the new version}. The version is one more than the highest the board has seen
        (desired or reported), so a board never takes it for an old one."""
        if not isinstance(changes, dict):
            raise CommandError("desired state changes are an object of sections")
        out = {}
        change = uuid.uuid4().hex[:12]
        for b in boards:
            with self.lock:
                d = self.desired_docs.get(b) or {"version": 0, "state": {}}
                r = self.reported_docs.get(b) or {"version": 0}
            state = dict(d.get("state") or {})
            for k, v in changes.items():
                if v is None:
                    state.pop(k, None)
                else:
                    state[k] = v
            v = max(d.get("version") or 0, r.get("version") or 0) + 1
            doc = {"version": v, "state": state}
            self._publish(DESIRED % b, json.dumps(doc, separators=(",", ":")), retain=True)
            with self.lock:
                self.desired_docs[b] = doc
            out[b] = v
        self._land("desired", [(b, {"version": v, "change": change}) for b, v in out.items()])
        return out

    def drift(self, boards):
        """-> [(board, desired version, reported version, error)] for the boards whose
        reported version is not the desired one (or that report an error)."""
        rows = []
        with self.lock:
            for b in boards:
                d = (self.desired_docs.get(b) or {}).get("version")
                r = self.reported_docs.get(b) or {}
                if d != r.get("version") or r.get("error"):
                    rows.append((b, d, r.get("version"), r.get("error")))
        return rows

    def wait_converged(self, boards, timeout, progress=None):
        """Wait until every board reports its desired version -> the boards still drifting."""
        end = time.time() + timeout
        with self.lock:
            while True:
                left = [b for b, d, r, e in self.drift(boards) if d != r]
                if progress:
                    progress(len(boards) - len(left), len(boards))
                if not left or time.time() >= end:
                    return left
                self.lock.wait(min(end - time.time(), 0.5))


def read_devices(path):
    """A devices file (one id a line, optionally ",group"; `fleetwire rollout`'s) -> ([ids], {id: group})."""
    ids, groups = [], {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            dev, _, group = (x.strip() for x in line.partition(","))
            if not dev or any(c in dev for c in "/+#"):
                raise CommandError("%s line %d: %r is not a device id" % (path, n, dev))
            ids.append(dev)
            if group:
                groups[dev] = group
    return ids, groups


def bar(done, total, width=24):
    n = width * done // total if total else width
    return "[%s%s] %d/%d" % ("#" * n, "." * (width - n), done, total)

"""The collector: subscribes to the fleet's telemetry and lands every record in the
landing zone that `fleetwire report` reads, losing none.

    LANDING/date=YYYY-MM-DD/hour=HH/<collector id>-<opened>.ndjson

- QoS 1 on a persistent session (clean_session=False, a fixed client id): records
  published while the collector is down wait at the broker.
- A record is written and flushed to the operating system before paho acknowledges
  it (PUBACK goes after on_message returns), so a kill -9 loses nothing: the broker
  redelivers what was not acknowledged. Duplicates can happen; the report removes them.
- Files being written are hidden (".<name>.part") and renamed when their hour (by
  receive time, UTC) is over or the collector stops: readers only ever see whole files.
  A restart finishes the files a killed collector left (a torn last line is cut off:
  its record was not acknowledged, so it comes again).
- Records that are not valid telemetry go to LANDING/_quarantine/date=.../*.ndjson with
  the reason, never dropped silently and never fatal.
- Several collectors share the load with share="group" ($share/group/fleet/+/telemetry; mosquitto
  2 serves shared subscriptions to MQTT 3.1.1 clients too): each record goes to one of them, and
  a record redelivered after a collector's crash may land twice, which the report removes. Each
  collector needs an id of its own (it is its MQTT client id): its files carry it, so collectors
  sharing a landing zone never write, finish or recover each other's files.
- Crash records (fleet/+/crash, fleetwire.crashsend) land one file a crash,
  LANDING/_crashes/<device_id>.<boot_id>.<crash_id>.json: a copy sent again lands nothing.
- With commands=True (`fleetwire collect --commands`) it also lands the boards' command
  answers and reported states (fleet/+/answer, fleet/+/reported: fleetwire.host.command) in
  LANDING/_commands/date=YYYY-MM-DD/<collector id>.ndjson, one line each with its device_id,
  kind ("answer" or "reported") and rx_ts; the report's telemetry scan skips "_" folders.
- On a broker that enforces fleet identity (`fleetwire broker-config`) it logs in with a
  certificate of its own (tls_cert/tls_key, `fleetwire ca issue collector --role collector`),
  checking the broker's against tls_ca; the broker's ACL lets it read telemetry only.
"""

import base64
import datetime
import json
import os
import re
import threading
import time

from fleetwire.host.fleet import record as schema
from fleetwire.host.identity.login import Subscriber, connect_and_wait, disconnect, paho_client

TOPIC = "fleet/+/telemetry"
CRASH_TOPIC = "fleet/+/crash"
CRASHES = "_crashes"  # LANDING/_crashes/<device_id>.<boot_id>.<crash_id>.json: one file a crash
CRASH_KEY = (("device_id", str), ("boot_id", int), ("crash_id", int), ("kind", str))
COMMAND_TOPICS = ("fleet/+/answer", "fleet/+/reported")
MAX_RECORD = 64 * 1024
_TYPES = {"string": (str,), "long": (int,), "double": (int, float)}
_TOPIC_RE = re.compile(r"^fleet/([^/]+)/telemetry$")


def check_record(topic, payload):
    """-> (record dict, None) or (None, reason)."""
    if len(payload) > MAX_RECORD:
        return None, "record of %d bytes is over %d" % (len(payload), MAX_RECORD)
    try:
        rec = json.loads(payload)
    except (ValueError, UnicodeDecodeError) as e:
        return None, "not JSON: %s" % e
    if not isinstance(rec, dict):
        return None, "not a JSON object"
    missing = [f for f in schema.REQUIRED if rec.get(f) is None]
    if missing:
        return None, "missing %s" % ", ".join(missing)
    for name, kind in schema.FIELDS:
        v = rec.get(name)
        if v is not None and (isinstance(v, bool) or not isinstance(v, _TYPES[kind])):
            return None, "%s is %s, not %s" % (name, type(v).__name__, kind)
    m = _TOPIC_RE.match(topic)
    if m and m.group(1) != rec["device_id"]:
        return None, "device_id %r does not match the topic %r" % (rec["device_id"], topic)
    return rec, None


def check_crash(topic, payload):
    """A crash record -> (record dict, None) or (None, reason). A board sends the record's
    bytes as fleetwire.crash took them ("FC" first: decoded by crashrec.parse, the device
    from the topic); a simulated device, its JSON."""
    if len(payload) > MAX_RECORD:
        return None, "crash record of %d bytes is over %d" % (len(payload), MAX_RECORD)
    if payload[:2] == b"FC":
        from fleetwire.host.fleet.crashrec import parse

        m = _CRASH_RE.match(topic)
        rec = parse(payload, m.group(1) if m else None)
        if rec is None:
            return None, "a crash record whose sum or offsets do not check (%d bytes)" % len(payload)
        payload = json.dumps(rec)
    try:
        rec = json.loads(payload)
    except (ValueError, UnicodeDecodeError) as e:
        return None, "not JSON: %s" % e
    if not isinstance(rec, dict):
        return None, "not a JSON object"
    for name, kind in CRASH_KEY:
        if not isinstance(rec.get(name), kind) or isinstance(rec.get(name), bool):
            return None, "crash record without its %s" % name
    m = _CRASH_RE.match(topic)
    if not m or m.group(1) != rec["device_id"]:
        return None, "device_id %r does not match the topic %r" % (rec["device_id"], topic)
    if not re.match(r"^[A-Za-z0-9_.:-]+$", rec["device_id"]):
        return None, "device_id %r cannot name a file" % rec["device_id"]
    return rec, None


_CRASH_RE = re.compile(r"^fleet/([^/]+)/crash$")


def _hour(ms):
    t = datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc)
    return t.strftime("date=%Y-%m-%d"), t.strftime("hour=%H")


class Collector(Subscriber):
    """Collector(broker_host, broker_port, landing, collector_id="collector-1", share=None).

    start() connects and returns once subscribed; stop() disconnects and closes
    every file. Counters: received, landed, quarantined, files."""

    def __init__(
        self,
        host,
        port,
        landing,
        collector_id="collector-1",
        share=None,
        topic=TOPIC,
        clock=time.time,
        fsync=False,
        user=None,
        password=None,
        tls_ca=None,
        tls_cert=None,
        tls_key=None,
        commands=False,
    ):
        if not re.match(r"^[A-Za-z0-9_.-]+$", collector_id):
            raise ValueError("collector id %r: use letters, digits, '_', '.', '-'" % collector_id)
        self.host, self.port = host, port
        self.landing = landing
        self.id = collector_id
        self.topic = ("$share/%s/%s" % (share, topic)) if share else topic
        self.crash_topic = ("$share/%s/%s" % (share, CRASH_TOPIC)) if share else CRASH_TOPIC
        self.commands = (
            [(("$share/%s/%s" % (share, t)) if share else t) for t in COMMAND_TOPICS] if commands else []
        )
        self.clock = clock
        self.fsync = fsync
        self.received = self.landed = self.quarantined = self.files = 0
        self.crashes = self.crash_repeats = 0  # crash records landed, and copies of one landed
        self._open = {}  # (date, hour) -> (file, part path, final path)
        self._lock = threading.Lock()
        self.answered = threading.Event()  # a SUBACK or a refusal came
        self._client = None
        self.user, self.password = user, password
        if (tls_cert or tls_key) and not (tls_cert and tls_key and tls_ca):
            raise ValueError(
                "a client certificate needs its key and the broker's CA (tls_cert, tls_key, tls_ca)"
            )
        self.tls = (tls_ca, tls_cert, tls_key)
        self.connected = False
        self.error = None  # why the broker last refused or dropped us, None while all is well

    # ---- life

    def start(self, timeout=10):
        os.makedirs(self.landing, exist_ok=True)
        self.recover()
        c = paho_client(self.id, False, self.user, self.password, self.tls)
        c.on_connect = self._on_connect
        c.on_disconnect = self._on_disconnect
        c.on_message = self._on_message
        c.on_subscribe = self._on_subscribe
        c.reconnect_delay_set(1, 30)
        self._client = c
        why = connect_and_wait(c, self.host, self.port, self.answered, lambda: self.error, timeout)
        if why:
            self.stop()
            raise RuntimeError("broker %s:%d: %s" % (self.host, self.port, why))
        return self

    def stop(self):
        c, self._client = self._client, None
        disconnect(c)
        self.close_all()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def subscriptions(self):
        return [(self.topic, 1), (self.crash_topic, 1)] + [(t, 1) for t in self.commands]

    def _on_disconnect(self, client, userdata, flags, rc, props):
        was, self.connected = self.connected, False
        # after a refusal the broker closes the socket: keep the refusal as the reason
        if was and self._client is not None and rc != 0:  # not our own disconnect(): paho reconnects
            self.error = "connection lost: %s (reconnecting)" % rc

    # ---- records

    def _on_message(self, client, userdata, m):
        now = int(self.clock() * 1000)
        with self._lock:
            self.received += 1
            if m.topic.endswith("/crash"):
                self._crash(now, m.topic, m.payload)
                return
            parts = m.topic.split("/")
            if self.commands and len(parts) == 3 and parts[2] in ("answer", "reported"):
                return self._command(now, parts[1], parts[2], m)
            rec, reason = check_record(m.topic, m.payload)
            if rec is None:
                self._quarantine(now, m.topic, m.payload, reason)
                return
            rec["rx_ts"] = now
            f = self._file(now)
            f.write(json.dumps(rec, separators=(",", ":")) + "\n")
            f.flush()  # in the OS before PUBACK: a kill -9 cannot lose it
            self.landed += 1

    def _crash(self, now, topic, payload):
        # One file a crash, named by its key: a copy sent again (its PUBACK was lost, the board
        # reset before it) finds the file and lands nothing. Written whole, then renamed.
        rec, reason = check_crash(topic, payload)
        if rec is None:
            self._quarantine(now, topic, payload, reason)
            return
        d = os.path.join(self.landing, CRASHES)
        path = os.path.join(d, "%s.%d.%d.json" % (rec["device_id"], rec["boot_id"], rec["crash_id"]))
        if os.path.exists(path):
            self.crash_repeats += 1
            return
        os.makedirs(d, exist_ok=True)
        rec["rx_ts"] = now
        tmp = os.path.join(d, ".%s.part" % os.path.basename(path))
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(rec, f, separators=(",", ":"))
            if self.fsync:
                f.flush()
                os.fsync(f.fileno())
        os.rename(tmp, path)  # before PUBACK: a kill -9 loses nothing, and leaves no half file
        self.crashes += 1

    def _file(self, now):
        key = _hour(now)
        e = self._open.get(key)
        if e is None:
            for k in list(self._open):  # a new hour: the old ones are done
                self._close(k)
            d = os.path.join(self.landing, *key)
            os.makedirs(d, exist_ok=True)
            name = "%s-%d.ndjson" % (self.id, now)
            part = os.path.join(d, ".%s.part" % name)
            e = (open(part, "a", encoding="utf-8"), part, os.path.join(d, name))
            self._open[key] = e
        return e[0]

    def _close(self, key):
        f, part, final = self._open.pop(key)
        f.flush()
        if self.fsync:
            os.fsync(f.fileno())
        f.close()
        os.rename(part, final)  # atomic: readers see the whole file or none
        self.files += 1

    def close_all(self):
        with self._lock:
            for k in list(self._open):
                self._close(k)

    def _command(self, now, device, kind, m):
        try:
            body = json.loads(m.payload) if m.payload else None
        except (ValueError, UnicodeDecodeError) as e:
            return self._quarantine(now, m.topic, m.payload, "not JSON: %s" % e)
        if body is not None and not isinstance(body, dict):
            return self._quarantine(now, m.topic, m.payload, "not a JSON object")
        d = os.path.join(self.landing, "_commands", _hour(now)[0])
        os.makedirs(d, exist_ok=True)
        line = {"rx_ts": now, "device_id": device, "kind": kind, "body": body}
        with open(os.path.join(d, "%s.ndjson" % self.id), "a", encoding="utf-8") as f:
            f.write(json.dumps(line, separators=(",", ":")) + "\n")  # before PUBACK, as records
        self.landed += 1

    def _quarantine(self, now, topic, payload, reason):
        date, _ = _hour(now)
        d = os.path.join(self.landing, "_quarantine", date)
        os.makedirs(d, exist_ok=True)
        try:
            text = {"payload": payload.decode("utf-8")}
        except UnicodeDecodeError:
            text = {"payload_b64": base64.b64encode(payload[:MAX_RECORD]).decode()}
        if len(payload) > MAX_RECORD:
            text = {"payload_head": payload[:256].decode("utf-8", "replace")}
        line = dict(rx_ts=now, topic=topic, reason=reason, **text)
        with open(os.path.join(d, "%s.ndjson" % self.id), "a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")
        self.quarantined += 1

    # ---- after a crash

    def recover(self):
        """Finish the files a previous run of this collector left open -> how many."""
        n = 0
        # its own files only: the landing zone may be shared, and another collector's id may begin
        # with this one's ("c1" and "c1-b"), so the name is matched whole
        mine = re.compile(r"^\.%s-\d+\.ndjson\.part$" % re.escape(self.id))
        for dirpath, dirnames, filenames in os.walk(self.landing):
            dirnames[:] = [x for x in dirnames if not x.startswith("_")]
            for name in filenames:
                if not mine.match(name):
                    continue
                part = os.path.join(dirpath, name)
                with open(part, "rb+") as f:
                    data = f.read()
                    end = data.rfind(b"\n") + 1
                    if end < len(data):  # torn last line: never acknowledged, it comes again
                        f.truncate(end)
                if end:
                    os.rename(part, os.path.join(dirpath, name[1 : -len(".part")]))
                else:
                    os.remove(part)
                n += 1
        return n

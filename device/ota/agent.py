# fleetwire.ota: over-the-air updates over MQTT, loaded only by programs that enable them
# (fleetwire.runner with "ota": true in config.json, or ota.enable(client, ...)).
#
# Topics (every one within the board's own ACL: `fleetwire broker-config` lets a board read
# fleet/<id>/ota/# and publish one level under fleet/<id>/):
#   fleet/<id>/ota/offer   operator -> board, QoS 1, retained: the release this board should run,
#                          a JSON manifest {"v": 1, "op": "install", "version", "kind": "app" |
#                          "firmware", "size", "sha256", "chunk", "board"} ("rollback": the
#                          version an older release replaces); {"op": "revert", "version",
#                          "rollback"} orders it back; an empty message withdraws the offer
#   fleet/<id>/ota_get     board -> update service, QoS 0: "send `count` chunks of `chunk` bytes
#                          from `offset`" (16 bytes: the release's tag, offset, chunk, count)
#   fleet/<id>/ota/chunk   update service -> board, QoS 1: tag (8) + offset (4) + data; no data
#                          says the service's copy ends at that offset
#   fleet/<id>/ota/keys    operator -> board, QoS 1, retained: a key update, the release-signing
#                          keys the board trusts from then on (fleetwire.ota.trust)
# An offer and a key update are signed: {"manifest": "<its JSON text>", "key", "sig"}; the board
# takes only what a key in ota/keys.json signed (fleetwire.ota.trust, loaded for the check).
# The board pulls: it asks for the next window of chunks once it has written the last, so it
# goes at its flash's pace, resumes from what is on its flash after a reset, and the broker
# keeps no image (retained chunks would go to every board that subscribes, all of them, from
# byte 0, at the broker's pace). Requests are QoS 0: a lost one is asked again.
#
# The resident part is this module: the chunk path, the timers and the vitals member. An
# offer (taken by step(): its signature checked by fleetwire.ota.trust first, then the rest),
# the check and switch of a finished download and the trial's end run in
# fleetwire.ota.ops, loaded for the moment and dropped again; the download itself is a
# target's (fleetwire.ota.app: an app bundle in files; fleetwire.ota.fw: a firmware image in
# the next OTA partition). RAM while downloading: one buffer of the chunk size and the
# 16-byte request; a chunk goes from the client's message straight to flash.
try:
    from time import ticks_ms, ticks_diff
except ImportError:
    from ..cpython import ticks_ms, ticks_diff

from ..vitals import copy, num

# the state the vitals record reports (index = state)
IDLE, DOWNLOADING, VERIFYING, APPLIED, CONFIRMED, ROLLED_BACK, REFUSED, FAILED, CANCELLED = range(9)
NAMES = (
    "idle",
    "downloading",
    "verifying",
    "applied",
    "confirmed",
    "rolled_back",
    "refused",
    "failed",
    "cancelled",
)
_JSON = tuple(('"%s"' % n).encode() for n in NAMES)
HDR = 12  # chunk header: tag 8, offset 4
RETRY_MS = 5000  # no chunk for this long while downloading: ask again (doubling to a minute)


def ops():
    """fleetwire.ota.ops, loaded for the moment (drop() gives its RAM back)."""
    from . import ops

    return ops


def drop():
    import sys

    pkg = __name__.rsplit(".", 1)[0]
    # trust: the signature check, for an offer or a key update; reasons: a refusal's texts
    for n in ("ops", "trust", "reasons"):
        sys.modules.pop(pkg + "." + n, None)
        try:  # the package holds its submodules too
            delattr(sys.modules[pkg], n)
        except (AttributeError, KeyError, TypeError):
            pass


class Updater:
    """Updater(device_id, send, vitals=None, max_packet=1024, window=8, confirm_s=120, kind=None,
    restart=None, report=None, targets=None, boot_ms=None, running=None, states=None).

    send(topic, payload) publishes (QoS 0); handle(topic, msg) takes the messages of
    fleet/<id>/ota/# (-> True, or False for another topic); step() from the main loop (an
    offer, timers, verifying, applying, confirming). restart() is called once an update is
    switched (default: fleetwire.board.reset()). `vitals` (a fleetwire.vitals.Vitals) carries the state in its
    records (report(), default vitals.publish(), sends one when the state changes) and says
    when the first one of this boot is acknowledged. `running`: the version the deployed app
    calls itself (config.json's fw_version), for offers of what already runs. `states` keeps
    the boot state and the download's record (default fleetwire.ota.state.FileStates(): files
    under ota/); `targets` maps a kind ("app", "firmware") to where its downloads go."""

    def __init__(
        self,
        device_id,
        send,
        vitals=None,
        max_packet=1024,
        window=8,
        confirm_s=120,
        kind=None,
        restart=None,
        report=None,
        targets=None,
        boot_ms=None,
        running=None,
        states=None,
    ):
        base = "fleet/%s/ota" % device_id
        self.id = device_id
        self.t_all = (base + "/#").encode()
        self.t_offer = (base + "/offer").encode()
        self.t_chunk = (base + "/chunk").encode()
        self.t_get = ("fleet/%s/ota_get" % device_id).encode()
        self._prefix = (base + "/").encode()
        self.send = send
        self.vitals = vitals
        self.max_packet = max_packet
        self.window = max(1, window)
        self.confirm_ms = int(confirm_s * 1000)
        self.kind = kind
        self.restart = restart
        self.report = report
        self.running = running
        self.targets = targets or {}
        self.boot_ms = ticks_ms() if boot_ms is None else boot_ms
        self.state = IDLE
        self.version = b"null"  # JSON of the release the state is about
        self.code = b"null"
        self.reason = b"null"
        self.done = 0
        self.size = 0
        self.m = None  # the manifest being downloaded
        self.target = None
        self.chunk = 0
        self.tag = None
        self.buf = None
        self._req = bytearray(16)
        self._want = 0  # the window asked for ends here
        self._last_rx = 0
        self._retry = RETRY_MS
        self.verify_due = False
        self.restart_due = False
        self.held = None  # the offer step() takes next (after a release on trial)
        self.parked = None  # an offer signed by a key not held yet: held once a key update brings it
        self.log = print  # what it tells the console (a simulator silences it)
        if states is None:
            from .state import FileStates

            states = FileStates()
        self.states = states
        self.st = states.load("boot") or {}
        o = ops()
        o.start(self)
        drop()
        if vitals is not None:
            vitals.ota = self
            vitals.room(768)  # the record with its longest ota member

    # ---- what the vitals record says

    def show(self, state, version=None, code=None, reason=None):
        self.state = state
        self.version = _jstr(version) if version is not None else b"null"
        self.code = _jstr(code) if code else b"null"
        self.reason = _jstr(reason) if reason else b"null"

    def fmt(self, buf, i):
        """The record's "ota" member, formatted into buf at i -> the new end. No allocation."""
        if self.state == IDLE:
            return i
        i = copy(buf, i, b',"ota":{"state":')
        i = copy(buf, i, _JSON[self.state])
        i = copy(buf, i, b',"version":')
        i = copy(buf, i, self.version)
        if self.state == DOWNLOADING or self.state == VERIFYING:
            i = copy(buf, i, b',"done":')
            i = num(buf, i, self.done)
            i = copy(buf, i, b',"size":')
            i = num(buf, i, self.size)
        i = copy(buf, i, b',"code":')
        i = copy(buf, i, self.code)
        i = copy(buf, i, b',"reason":')
        i = copy(buf, i, self.reason)
        buf[i] = 125  # "}"
        return i + 1

    def tell(self):
        """A record now, not at the next period: the operator's rollout waits for it."""
        if self.report is not None:
            return self.report()
        if self.vitals is not None:
            try:
                self.vitals.publish()
            except Exception:  # noqa: BLE001 - a full queue: the next period's record says it
                pass

    # ---- messages

    def handle(self, topic, msg):
        """A message the client received -> True if it was this board's update topic."""
        if not topic.startswith(self._prefix):
            return False
        if topic == self.t_chunk:
            self._chunk(msg)
        elif topic == self.t_offer:
            # taken by step(): outside the client's callback, whose buffers the check's big
            # numbers would find in the heap, and after a release on trial
            self.held = msg
        elif topic.endswith(b"/keys"):
            from . import trust

            trust.update(self, msg)
            drop()
        return True

    def ask(self):
        """Ask for the next window: `window` chunks from what is on flash."""
        r = self._req
        tag = self.tag
        for k in range(8):
            r[k] = tag[k]
        o = self.done
        r[8] = o >> 24 & 255
        r[9] = o >> 16 & 255
        r[10] = o >> 8 & 255
        r[11] = o & 255
        c = self.chunk
        r[12] = c >> 8
        r[13] = c & 255
        r[14] = self.window >> 8
        r[15] = self.window & 255
        self._want = o + c * self.window
        self._last_rx = ticks_ms()
        try:
            self.send(self.t_get, r)
        except Exception as e:  # noqa: BLE001 - offline, a full queue: the timer asks again
            self.log("ota: request not sent:", e)

    def _chunk(self, msg):
        tag = self.tag
        if tag is None or self.verify_due or len(msg) < HDR:
            return
        for k in range(8):
            if msg[k] != tag[k]:
                return  # a chunk of another release (sent before the offer changed)
        o = msg[8] << 24 | msg[9] << 16 | msg[10] << 8 | msg[11]
        if o != self.done:
            return  # a repeat, or a window asked for before a reset
        n = len(msg) - HDR
        if n == 0 or o + n > self.size:
            ops().short(self, o, n)
            return drop()
        try:
            self.target.write(msg, HDR, n, o)
        except OSError as e:
            ops().io(self, e, o)
            return drop()
        self.done = o + n
        self._last_rx = ticks_ms()
        self._retry = RETRY_MS
        if self.done == self.size:
            self.verify_due = True  # step() checks it: not inside the client's callback
        elif self.done >= self._want:
            self.ask()

    # ---- the main loop's part

    def step(self):
        """From the main loop: ask again when chunks stopped coming; check and switch a finished
        download; confirm a release on trial, or reset one whose time ran out."""
        if self.restart_due or self.verify_due:
            o = ops()
            if self.restart_due:
                self.restart_due = False
                o.restart(self)
            else:
                self.verify_due = False
                o.finish(self)
            return drop()
        t = self.st.get("trial")
        if t:
            v = self.vitals
            if v is not None and v.acked:
                ops().confirm(self)
                drop()
            elif ticks_diff(ticks_ms(), self.boot_ms) > self.confirm_ms:
                from ..otaboot import expire

                expire(
                    "release %s: no vitals record acknowledged within %d s of boot"
                    % (t.get("version"), self.confirm_ms // 1000)
                )
            return
        if self.held is not None:
            msg, self.held = self.held, None
            if msg:  # its signature first (fleetwire.ota.trust, dropped), then the rest of an offer
                from . import trust

                msg = trust.opened(self, msg)
                drop()
            ops().offered(self, msg)
            drop()
        if self.state == DOWNLOADING and self.tag is not None:
            if ticks_diff(ticks_ms(), self._last_rx) > self._retry:
                self._retry = min(self._retry * 2, 60000)
                self.ask()


def _jstr(s, limit=200):
    # printable ASCII without quotes or backslashes: its JSON is its length + 2, so the
    # record's buffer is sure to hold it
    s = "".join(c if " " <= c <= "~" and c != '"' and c != "\\" else "?" for c in str(s)[:limit])
    return ('"%s"' % s).encode()


def enable(client, device_id, vitals=None, callback=None, cfg=None, boot_ms=None, **kw):
    """Updates for a program with an MQTTClient: subscribe to fleet/<id>/ota/# (QoS 1) and
    hand those messages to an Updater, the others to `callback` (the program's own: set it
    here, enable() takes the client's callback). -> the Updater; call its step() from the main
    loop. cfg (config.json) may set ota_confirm_s, ota_window, max_packet (the client's),
    board_kind and fw_version."""
    cfg = cfg or {}
    kw.setdefault("confirm_s", cfg.get("ota_confirm_s", 120))
    kw.setdefault("window", cfg.get("ota_window", 8))
    kw.setdefault("max_packet", cfg.get("max_packet", 1024))
    kw.setdefault("kind", cfg.get("board_kind"))
    kw.setdefault("running", cfg.get("fw_version"))

    def send(topic, payload):
        client.publish(topic, payload, False, 0, block=False)

    if "restart" not in kw and vitals is not None:

        def restart():
            # the record that says "applied" goes out first (a few seconds at most); the reset
            # is marked deliberate, so the report does not count it as a crash
            t0 = ticks_ms()
            while client.pending and ticks_diff(ticks_ms(), t0) < 3000:
                client.loop(50)
            vitals.deliberate_reset()

        kw["restart"] = restart
    u = Updater(device_id, send, vitals, boot_ms=boot_ms, **kw)
    # an update message longer than max_packet (a signed offer, a key update) comes in pieces:
    # [bytes still to come, the pieces so far]
    part = [0]

    def on_msg(topic, msg):
        r = client.rest
        if (r or part[0]) and topic.startswith(u._prefix):
            if part[0] != len(msg) + r:
                del part[1:]  # the first piece (or the one begun was cut off with its connection)
            part[0] = r
            part.append(bytes(msg))
            if r:
                return
            msg = b"".join(part[1:])
            del part[1:]
        if not u.handle(topic, msg) and callback is not None:
            callback(topic, msg)

    client.set_callback(on_msg)
    client.subscribe(u.t_all, 1)
    return u

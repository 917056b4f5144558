# An asyncio front over the same sans-IO Session, for applications written the
# mqtt_as way: `await client.publish(...)` suspends only the calling task. One
# reader task feeds received bytes to the session; a keepalive task runs its
# deadlines; with reconnect=True a third task brings the link back. Works with
# MicroPython's asyncio and CPython's.
import asyncio

from .session import (MQTTException, ConnectRefused, SessionTakenOver,
                      CONNECTING, CONNECTED, DISCONNECTED, to_bytes, backoff, say, Front)

try:
    from time import ticks_ms, ticks_diff
except ImportError:
    from .cpython import ticks_ms, ticks_diff
try:
    from random import getrandbits
except ImportError:  # a port built without random
    from .cpython import getrandbits


class AsyncClient(Front):
    """await connect() / publish() / subscribe() / unsubscribe() / disconnect().

    Options are MQTTClient's, reconnect= and store= included. set_callback(f) gets
    f(topic, msg) for each message. Events: on_connect(session_present),
    on_disconnect(reason), on_reconnect(attempt, delay_ms), on_delivered(pid),
    on_discarded(topic, msg, qos). With reconnect=True, a publish() waiting for
    its acknowledgement waits across reconnects (up to `timeout`)."""

    def __init__(self, client_id, server, port=0, user=None, password=None, keepalive=0,
                 ssl=None, *, max_inflight=10, queue_size=16, max_packet=1024,
                 max_subscriptions=8, drop_oldest=False, timeout=10, reconnect=False,
                 backoff_min=1, backoff_max=128, takeover_kicks=3, store=None):
        super().__init__(client_id, server, port, user, password, keepalive, ssl, max_inflight,
                         queue_size, max_packet, max_subscriptions, drop_oldest, timeout, reconnect,
                         backoff_min, backoff_max, takeover_kicks, store)
        self._s.on_unsuback = self._progress
        self._r = self._w = None
        self._tasks = ()
        self._ev = asyncio.Event()
        self._rx = memoryview(bytearray(256))  # a view: feed() slices it without copying
        self._sub_rc = {}
        self._error = None      # why the link went down last
        self._fatal = None      # why reconnecting stopped for good
        self._retrying = False  # the reconnect task is running
        self._retry_task = None
        self._closing = False   # disconnect() was called: do not come back

    # set_callback and set_last_will are Front's

    async def connect(self, clean_session=True):
        """Connect and wait for CONNACK -> 1 if the broker had a session, else 0. A clean
        session starts with no subscriptions (the client's own reconnects renew them)."""
        if clean_session:
            self._s.forget()
        self._clean = clean_session
        self._closing = False
        self._fatal = None
        await self._open()
        return 1 if self._s.session_present else 0

    async def publish(self, topic, msg, retain=False, qos=0, wait=True):
        """Publish -> the packet id. QoS 1/2 returns once the broker has completed the
        flow; with wait=False at once (on_delivered(pid) tells, and while a reconnect
        is under way the message waits in the queue or the store)."""
        if isinstance(msg, str):
            msg = msg.encode("utf-8")
        s = self._s
        if s.state != CONNECTED and not self._retrying:
            raise self._fatal or MQTTException(say("not_conn"))
        pid = s.publish(to_bytes(topic), bytes(msg), qos, retain)
        await self._flush()
        if qos and wait:
            await self._until(lambda: not s.holds(pid))
        return pid

    async def subscribe(self, topic, qos=0):
        pid = self._s.subscribe(to_bytes(topic), qos)
        await self._flush()
        await self._until(lambda: pid in self._sub_rc)
        rc = self._sub_rc.pop(pid)
        if rc == 0x80:
            raise MQTTException(say("sub_refuse", topic))
        return rc

    async def unsubscribe(self, topic):
        pid = self._s.unsubscribe(to_bytes(topic))
        await self._flush()
        await self._until(lambda: not self._s.sub_pending(pid))

    async def disconnect(self):
        self._closing = True
        t, self._retry_task = self._retry_task, None
        if t is not None and t is not asyncio.current_task():
            t.cancel()  # a reconnect under way must not bring the link back
        s = self._s
        if s.state == CONNECTED:
            s.disconnect()
            await self._flush()
        await self._shutdown(None)

    # ---- the connection

    async def _open(self):
        s = self._s
        s.clean_session = self._clean
        s.connect_packet()  # arguments MQTT refuses raise here (ValueError), before anything opens
        if self.ssl:
            r, w = await asyncio.open_connection(self.server, self.port, ssl=self.ssl,
                                                 server_hostname=self.server)
        else:
            r, w = await asyncio.open_connection(self.server, self.port)
        self._r, self._w = r, w
        self._error = None
        self._eof = False
        s.start(ticks_ms())
        self._tasks = (asyncio.create_task(self._reader()), asyncio.create_task(self._pinger()))
        await self._flush()
        try:
            await self._until(lambda: s.state != CONNECTING, True)
        except BaseException as e:
            if self._w is not None:
                await self._shutdown(e if isinstance(e, Exception) else None)  # nothing left open
            raise

    async def _reconnect(self):
        # Backoff with jitter, as MQTTClient; ends connected, or with _fatal set.
        try:
            while self.reconnect and not self._closing:
                self._delay, wait = backoff(self._delay, self.backoff_min, self.backoff_max,
                                            getrandbits(16))
                self._attempt += 1
                if self.on_reconnect:
                    self.on_reconnect(self._attempt, wait)
                await asyncio.sleep(wait / 1000)
                if self._closing or not self.reconnect:
                    return
                try:
                    await self._open()
                    if self._s.state == CONNECTED:
                        return
                    # lost again before this task ran on: go round once more
                except ConnectRefused as e:
                    if e.code != 3:  # only "server unavailable" is worth retrying
                        self._fatal = e
                        return
                except (OSError, MQTTException):
                    pass
        finally:
            self._retrying = False
            self._progress()

    async def _until(self, cond, strict=False):
        # Wait, at most `timeout` seconds, until cond() holds. A lost link fails the
        # wait unless a reconnect is under way (strict: always).
        t0 = ticks_ms()
        while not cond():
            if self._fatal is not None:
                raise self._fatal
            if (strict or not self._retrying) and (self._error is not None or self._s.state == DISCONNECTED):
                raise self._error or MQTTException(say("not_conn"))
            left = self.timeout_ms - ticks_diff(ticks_ms(), t0)
            if left <= 0:
                raise MQTTException(say("timeout", self.timeout_ms))
            try:
                await asyncio.wait_for(self._ev.wait(), left / 1000)
            except asyncio.TimeoutError:
                pass

    def _progress(self, *_):
        # Wake every waiter; each re-checks its own condition.
        ev = self._ev
        self._ev = asyncio.Event()
        ev.set()

    # ---- session events

    def _suback(self, pid, rc):
        self._sub_rc[pid] = rc
        self._progress()

    def _connack(self, present):
        self._progress()
        super()._connack(present)

    def _delivered(self, pid):
        self._progress()
        super()._delivered(pid)

    def _message(self, topic, msg, first):
        if self.cb:
            self.cb(topic, msg)

    # ---- tasks

    async def _flush(self):
        s = self._s
        w = self._w
        if w is None:
            return
        wrote = False
        try:
            while True:
                n = s.pack_next(ticks_ms())
                if not n:
                    break
                w.write(bytes(s.tx[:n]))
                s.wrote(ticks_ms())
                wrote = True
            if wrote:
                await w.drain()
        except OSError as e:  # the link broke under us: the reader's loss handling applies
            if w is self._w:
                await self._shutdown(e)

    async def _reader(self):
        s = self._s
        rd = s.reader
        try:
            while True:
                if hasattr(self._r, "readinto"):
                    n = await self._r.readinto(self._rx)
                    data = self._rx
                else:
                    data = await self._r.read(len(self._rx))
                    n = len(data)
                if not n:
                    self._eof = True
                    raise OSError(104, say("closed"))
                i = 0
                while i < n:
                    if not s.room():
                        await self._flush()  # write the acks waiting before taking more
                    i = s.feed(data, i, n, ticks_ms())
                    if rd.ready:
                        s.handle(ticks_ms())
                await self._flush()
        except asyncio.CancelledError:
            raise
        except Exception as e:
            await self._shutdown(e)

    async def _pinger(self):
        s = self._s
        try:
            while True:
                wait = s.tick(ticks_ms())
                await self._flush()
                await asyncio.sleep(wait / 1000)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            await self._shutdown(e)

    async def _shutdown(self, reason):
        me = asyncio.current_task()
        for t in self._tasks:
            if t is not me:
                t.cancel()
        self._tasks = ()
        w = self._w
        self._r = self._w = None
        if w is not None:
            try:
                w.close()
                await w.wait_closed()
            except Exception:
                pass
        was = self._s.state == CONNECTED
        if was:
            self._went_down(ticks_ms())
        self._s.lost()
        if reason is not None:
            self._error = reason if isinstance(reason, Exception) else MQTTException(str(reason))
        if was and reason is not None and self.on_disconnect:
            self.on_disconnect(reason)
        if reason is not None and was and self.reconnect and not self._closing and not self._retrying:
            if self.takeover_kicks and self._kicks >= self.takeover_kicks:
                self._fatal = SessionTakenOver(self._kicks, self._s.client_id)
            elif not isinstance(reason, ConnectRefused):
                self._retrying = True
                self._retry_task = asyncio.create_task(self._reconnect())
        self._progress()

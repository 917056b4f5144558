# An asyncio front over the same sans-IO Session, for applications written the
# mqtt_as way: `await client.publish(...)` suspends only the calling task. One
# reader task feeds received bytes to the session; a keepalive task runs its
# deadlines. Works with MicroPython's asyncio and CPython's.
import asyncio

from .session import Session, MQTTException, CONNECTING, CONNECTED, DISCONNECTED, to_bytes
from .codec.errors import CodecError
from .session import ProtocolError

try:
    from time import ticks_ms
except ImportError:
    import time as _time

    def ticks_ms():
        return int(_time.monotonic() * 1000)


class AsyncClient:
    """await connect() / publish() / subscribe() / unsubscribe() / disconnect().

    Options are MQTTClient's; set_callback(f) gets f(topic, msg) for each message,
    on_disconnect(reason) is called if the connection is lost."""

    def __init__(self, client_id, server, port=0, user=None, password=None, keepalive=0,
                 ssl=None, *, max_inflight=10, queue_size=16, max_packet=1024,
                 max_subscriptions=8, timeout=10):
        self.server = server
        self.port = port or (8883 if ssl else 1883)
        self.ssl = ssl
        self.timeout = timeout
        s = Session(to_bytes(client_id), keepalive, True, max_inflight, queue_size, max_packet,
                    max_subscriptions, False, int(timeout * 1000))
        s.set_login(user, password)
        s.on_message = self._message
        s.on_delivered = self._progress
        s.on_suback = self._suback
        s.on_unsuback = self._progress
        s.on_connack = self._progress
        self._s = s
        self._r = self._w = None
        self._tasks = ()
        self._ev = asyncio.Event()
        self._rx = bytearray(256)
        self._sub_rc = {}
        self._error = None
        self.cb = None
        self.on_disconnect = None

    def set_callback(self, f):
        self.cb = f

    def set_last_will(self, topic, msg, retain=False, qos=0):
        self._s.will = (to_bytes(topic), to_bytes(msg), qos, bool(retain))

    async def connect(self, clean_session=True):
        s = self._s
        s.clean_session = clean_session
        if self.ssl:
            r, w = await asyncio.open_connection(self.server, self.port, ssl=self.ssl,
                                                 server_hostname=self.server)
        else:
            r, w = await asyncio.open_connection(self.server, self.port)
        self._r, self._w = r, w
        self._error = None
        s.start(ticks_ms())
        self._tasks = (asyncio.create_task(self._reader()), asyncio.create_task(self._pinger()))
        await self._flush()
        await self._until(lambda: s.state != CONNECTING)
        return 1 if s.session_present else 0

    async def publish(self, topic, msg, retain=False, qos=0):
        """Publish; for QoS 1/2 returns once the broker has completed the flow."""
        if isinstance(msg, str):
            msg = msg.encode("utf-8")
        s = self._s
        pid = s.publish(to_bytes(topic), bytes(msg), qos, retain)
        await self._flush()
        if qos:
            await self._until(lambda: not s.holds(pid))
        return pid

    async def subscribe(self, topic, qos=0):
        pid = self._s.subscribe(to_bytes(topic), qos)
        await self._flush()
        await self._until(lambda: pid in self._sub_rc)
        rc = self._sub_rc.pop(pid)
        if rc == 0x80:
            raise MQTTException("broker refused the subscription to %r" % (topic,))
        return rc

    async def unsubscribe(self, topic):
        pid = self._s.unsubscribe(to_bytes(topic))
        await self._flush()
        await self._until(lambda: not self._s.sub_pending(pid))

    async def disconnect(self):
        s = self._s
        if s.state == CONNECTED:
            s.disconnect()
            await self._flush()
        await self._shutdown(None)

    def is_connected(self):
        return self._s.state == CONNECTED

    # ---- internals

    async def _until(self, cond):
        # Wait, at most `timeout` seconds, until cond() holds; fail if the link dies.
        t0 = ticks_ms()
        while not cond():
            if self._error is not None:
                raise self._error
            if self._s.state == DISCONNECTED:
                raise MQTTException("not connected")
            ev = self._ev
            left = self.timeout * 1000 - (ticks_ms() - t0)
            if left <= 0:
                raise MQTTException("timed out after %d s" % self.timeout)
            try:
                await asyncio.wait_for(ev.wait(), left / 1000)
            except asyncio.TimeoutError:
                pass

    def _progress(self, *_):
        # Wake every waiter; each re-checks its own condition.
        ev = self._ev
        self._ev = asyncio.Event()
        ev.set()

    def _suback(self, pid, rc):
        self._sub_rc[pid] = rc
        self._progress()

    def _message(self, topic, msg, first):
        if self.cb:
            self.cb(topic, msg)

    async def _flush(self):
        s = self._s
        w = self._w
        if w is None:
            return
        wrote = False
        while True:
            n = s.pack_next(ticks_ms())
            if not n:
                break
            w.write(bytes(s.tx[:n]))
            s.wrote(ticks_ms())
            wrote = True
        if wrote:
            await w.drain()

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
                    raise OSError(104, "connection closed by the broker")
                i = 0
                while i < n:
                    try:
                        i = rd.feed(data, i, n)
                    except CodecError as e:
                        raise ProtocolError("malformed packet from the broker: %s" % e)
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
        was = self._s.state != DISCONNECTED
        self._s.lost()
        if reason is not None:
            self._error = reason if isinstance(reason, Exception) else MQTTException(str(reason))
        self._progress()
        if was and reason is not None and self.on_disconnect:
            self.on_disconnect(reason)

# AsyncClient: the asyncio I/O loop around the same sans-IO Session, for programs written
# the mqtt_as way: `await client.publish(...)` suspends only the calling task. A reader task
# feeds received bytes to the session, a keepalive task runs its deadlines; with
# reconnect=True a third one (aioretry.py) brings the link back when the Session says when.
# The loop decides nothing: the Session does. MicroPython's asyncio and CPython's alike.
import asyncio

try:
    from micropython import const
    from time import ticks_ms, ticks_diff
except ImportError:
    from .cpython import const, ticks_ms, ticks_diff

from .session import Session, CONNECTING, CONNECTED, DISCONNECTED
from . import MQTTException, say

# the package: its __getattr__ loads an error class (errkinds.py) when one is first raised
fw = __import__(__name__.rpartition(".")[0], None, None, ["_"])

# errors, by their line in reasons.TEXT (a number costs a board no interned name)
_CLOSED = const(14)
_NOT_CONN = const(10)
_SUB_REFUSE = const(12)
_TIMEOUT = const(13)


class AsyncClient(Session):
    """await connect() / publish() / subscribe() / unsubscribe() / disconnect().

    AsyncClient(client_id, server, port=0, user=None, password=None, keepalive=0, ssl=None,
    **options): the options are MQTTClient's. With reconnect=True, a publish() waiting for
    its acknowledgement waits across reconnects (up to `timeout`)."""

    def __init__(self, client_id, server, port=0, user=None, password=None, keepalive=0, ssl=None, **options):
        Session.__init__(self, client_id, keepalive, True, user, password, **options)
        self.server = server
        self.port = port or (8883 if ssl else 1883)
        self.ssl = ssl
        self._r = self._w = None
        self._tasks = ()
        self._ev = asyncio.Event()
        self._error = None  # why the link went down last
        self.fatal = None  # why reconnecting stopped for good
        self._retry_task = None
        self._closing = False  # disconnect() was called: do not come back
        self._next = -1  # ms until the next attempt, as lost() said
        if self.reconnect:
            from . import aioretry  # the reconnect task (loaded now, never by a lost link)

            self._ar = aioretry

    async def connect(self, clean_session=True):
        """Connect and wait for CONNACK -> 1 if the broker had a session, else 0. A clean
        session starts with no subscriptions (the client's own reconnects renew them).
        Raises, with nothing left open, when the session did not come up (the link failed
        before CONNACK, no CONNACK within `timeout`, a refusal), as MQTTClient's does."""
        if clean_session:
            self.forget()
        self.clean_session = clean_session
        self._closing = False
        self.fatal = None
        try:
            await self._open()
        except BaseException:  # a cancelled connect() too
            t, self._retry_task = self._retry_task, None
            if t is not None:
                t.cancel()  # the link was up a moment: this call failed, the program decides
            self.lost(ticks_ms(), None)
            raise
        return 1 if self.session_present else 0

    async def publish(self, topic, msg, retain=False, qos=0, wait=True):
        """Publish -> the packet id. QoS 1/2 returns once the broker has completed the flow;
        with wait=False at once (on_delivered(pid) tells): offline, or while a reconnect is
        under way, the message waits in the queue or the store, as MQTTClient's
        publish(block=False) does."""
        if self.fatal is not None:
            raise self.fatal
        if wait and self.state != CONNECTED and self._retry_task is None:
            raise fw.NotConnected(say(_NOT_CONN))
        if type(msg) is not bytes:
            msg = msg.encode() if isinstance(msg, str) else bytes(msg)
        pid = Session.publish(self, topic, msg, qos, retain)
        await self._flush()
        if qos and wait:
            await self._until(lambda: not self.in_flight(pid))
        return pid

    async def subscribe(self, topic, qos=0):
        pid = Session.subscribe(self, topic, qos)
        await self._flush()
        try:
            await self._until(lambda: self.sub_result(pid) >= 0)
        except Exception:
            self.forget(pid)
            raise
        rc = self.sub_result(pid)
        if rc & 0x80:
            raise fw.SubscribeRefused(say(_SUB_REFUSE, topic))
        return rc

    async def unsubscribe(self, topic):
        pid = Session.unsubscribe(self, topic)
        await self._flush()
        await self._until(lambda: self.sub_result(pid) >= 0)

    async def disconnect(self):
        self._closing = True
        t, self._retry_task = self._retry_task, None
        if t is not None and t is not asyncio.current_task():
            t.cancel()  # a reconnect under way must not bring the link back
        if self.state == CONNECTED:
            Session.disconnect(self)
            await self._flush()
        await self._shutdown(None)

    # ---- the connection

    async def _open(self):
        # One attempt: TCP (and TLS), CONNECT, CONNACK. Returns with the session up, or
        # raises with the link shut down and the reason kept in _error.
        n = self.start(ticks_ms())  # what MQTT refuses raises here (ValueError), before anything opens
        if self.ssl:
            from .tls import aio  # (a dotted name would cost every board its string)

            o = aio.open_tls(self.server, self.port, self.ssl)
        else:
            o = asyncio.open_connection(self.server, self.port)
        r, w = await asyncio.wait_for(o, self.timeout_ms / 1000)
        self._r, self._w = r, w
        self._error = None
        self.eof = False
        self.last_out = ticks_ms()  # the CONNACK deadline runs from here
        try:
            w.write(bytes(self.tx[:n]))  # CONNECT first
            self._tasks = (asyncio.create_task(self._reader()),)
            await w.drain()  # (over TLS it waits for the handshake)
            await self._flush()
            await self._until(lambda: self.state != CONNECTING, True)  # Timeout: no CONNACK
            if self.state != CONNECTED:
                # the link went down, or the broker refused, before the session was up: the
                # reader shut it down and kept the reason
                raise self._error or fw.NotConnected(say(_NOT_CONN))
            # the keepalive task starts with the session: one started before CONNACK would
            # sleep through the CONNACK deadline, past a keepalive shorter than `timeout`
            self._tasks += (asyncio.create_task(self._pinger()),)
        except BaseException as e:
            if self._w is w:  # still open (no CONNACK within timeout, a cancelled call)
                await self._shutdown(e if isinstance(e, Exception) else None)
            raise

    async def _until(self, cond, strict=False):
        # Wait, at most `timeout` seconds, until cond() holds. A lost link fails the wait
        # unless a reconnect is under way (strict: always).
        t0 = ticks_ms()
        while not cond():
            if self.fatal is not None:
                raise self.fatal
            if (strict or self._retry_task is None) and (
                self._error is not None or self.state == DISCONNECTED
            ):
                raise self._error or fw.NotConnected(say(_NOT_CONN))
            left = self.timeout_ms - ticks_diff(ticks_ms(), t0)
            if left <= 0:
                raise fw.Timeout(say(_TIMEOUT, self.timeout_ms))
            try:
                await asyncio.wait_for(self._ev.wait(), left / 1000)
            except asyncio.TimeoutError:
                pass

    def _wake(self):
        # every waiter wakes and checks its own condition
        ev = self._ev
        self._ev = asyncio.Event()
        ev.set()

    # ---- tasks

    async def _flush(self):
        w = self._w
        if w is None:
            return
        try:
            n = self.pack(ticks_ms())
            if not n:
                return
            while n:
                t = self.tail  # a long message's payload, after its head in tx
                w.write(bytes(self.tx[: n - len(t) if t else n]))
                if t:
                    w.write(t)
                self.last_out = ticks_ms()
                n = self.pack(ticks_ms())
            await w.drain()
        except OSError as e:  # the link broke under us
            if w is self._w:
                await self._shutdown(e)

    async def _reader(self):
        r = self._r
        try:
            while self._r is r:  # until this link is shut down
                buf = self.rx()
                if hasattr(r, "readinto"):
                    n = await r.readinto(buf)
                    if n is None:  # TLS woke the reader with a record that held no data
                        continue
                else:
                    data = await r.read(len(buf))
                    n = len(data)
                    buf[:n] = data
                if not n:
                    self.eof = True
                    raise OSError(104, say(_CLOSED))
                self.received(n, ticks_ms())
                await self._flush()
                # then the packets already read that waited for room for their acks
                # (backpressure: nothing more is read until they are all taken)
                while self.received(0, ticks_ms()):
                    await self._flush()
        except asyncio.CancelledError:
            raise
        except Exception as e:
            await self._shutdown(e)

    async def _pinger(self):
        try:
            while True:
                wait = self.tick(ticks_ms())
                await self._flush()
                await asyncio.sleep(wait / 1000)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            await self._shutdown(e)

    async def _shutdown(self, why):
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
        if why is not None:
            self._error = why if isinstance(why, Exception) else MQTTException(str(why))
        # only a link that was up comes back by itself; a failed attempt is the caller's
        # (connect(), or the reconnect task) to judge
        again = self.state == CONNECTED and self.reconnect and not self._closing
        try:
            try:
                self._next = self.lost(ticks_ms(), why, again)
            except Exception as e:
                if e is not why or not again:
                    raise
                # Not the link's failure: the program's callback raised, or the heap ran out.
                # The link ends for it (MQTT-4.8.0-2: the broker sends the message again) and
                # on_disconnect said why; no call of the program's is under way to raise it
                # to, so the client comes back, as MQTTClient does at its next loop().
                self._next = self._rc.retry(self, why)
            if why is not None and again and self._retry_task is None:
                self._retry_task = asyncio.create_task(self._ar.run(self, self._next))
        except Exception as e:
            if e is not why:
                self.fatal = e  # the Session says reconnecting is over (a clash of client ids)
        self._wake()

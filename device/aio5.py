# AsyncClient speaking MQTT 5: fleetwire.aio.AsyncClient with v5.py's Session methods, for
# programs written the mqtt_as way. Loaded only by a program that asks for it:
#     from fleetwire.aio5 import AsyncClient
# (and v5.py, for its Session5: not client.py).
from . import aio
from .v5 import Session5, fw, word
from . import say


class AsyncClient(Session5, aio.AsyncClient):
    """AsyncClient(client_id, server, port=0, user=None, password=None, keepalive=0, ssl=None,
    session_expiry=None, **options): fleetwire.aio.AsyncClient speaking MQTT 5, with
    fleetwire.v5.MQTTClient's options, events and errors."""

    def __init__(
        self,
        client_id,
        server,
        port=0,
        user=None,
        password=None,
        keepalive=0,
        ssl=None,
        session_expiry=None,
        version=5,
        **options,
    ):
        if options.get("store") is not None:  # (its records are 3.1.1 packets)
            raise ValueError(word(9))
        aio.AsyncClient.__init__(self, client_id, server, port, user, password, keepalive, ssl, **options)
        self._asked(keepalive, session_expiry, options)

    async def publish(self, topic, msg, retain=False, qos=0, wait=True, props=None):
        """As fleetwire.aio's; props: a property block from encode_props(), sent with the
        message. A QoS 1/2 publish that waits raises PublishRefused if the broker refuses the
        message (wait=False: on_refused(pid, code) says so)."""
        if props is None:
            self._fits(topic, len(msg) + 1, qos)
            pid = await aio.AsyncClient.publish(self, topic, msg, retain, qos, wait)
        else:
            if self.fatal is not None:
                raise self.fatal
            if wait and self.state != 2 and self._retry_task is None:  # CONNECTED
                raise fw.NotConnected(say(10))
            msg = props + (msg.encode() if isinstance(msg, str) else msg)
            self._fits(topic, len(msg), qos)
            pid = self._queue5(topic, msg, qos, retain)
            await self._flush()
            if qos and wait:
                await self._until(lambda: not self.in_flight(pid))
        return self._done(pid) if wait else pid

    async def subscribe(self, topic, qos=0):
        try:
            return await aio.AsyncClient.subscribe(self, topic, qos)
        except fw.SubscribeRefused:
            raise self._sub_refused(topic)

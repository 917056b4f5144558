# AsyncClient speaking MQTT 5: fleetwire.aio.AsyncClient with v5.py's Session methods, for
# programs written the mqtt_as way. Loaded only by a program that asks for it:
#     from fleetwire.aio5 import AsyncClient
# (and v5.py, for its Session5: not client.py).
from . import aio
from .v5 import Session5, fw, word


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

    async def publish(self, topic, msg, retain=False, qos=0, wait=True):
        """As fleetwire.aio's; a QoS 1/2 publish that waits raises PublishRefused if the
        broker refuses the message (wait=False: on_refused(pid, code) says so)."""
        self._fits(topic, msg, qos)
        pid = await aio.AsyncClient.publish(self, topic, msg, retain, qos, wait)
        return self._done(pid) if wait else pid

    async def subscribe(self, topic, qos=0):
        try:
            return await aio.AsyncClient.subscribe(self, topic, qos)
        except fw.SubscribeRefused:
            raise self._sub_refused(topic)

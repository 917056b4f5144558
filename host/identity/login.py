"""A host tool's own MQTT client (paho-mqtt), logged in as fleet identity asks: a user name
and password, or mutual TLS with the tool's certificate (fleetwire ca issue). The collector
and the update service both connect this way."""


def paho_client(client_id, clean_session, user=None, password=None, tls=(None, None, None), version=4):
    """A paho-mqtt 2.x client, not yet connected. tls: (CA file, certificate, key); with no CA,
    plain MQTT. version: 4 (MQTT 3.1.1) or 5 (MQTT 5: paho's clean start at its first connect,
    so clean_session only). ValueError for a password without a user name (MQTT-3.1.2-22)."""
    import paho.mqtt.client as mqtt

    if version == 5:
        if not clean_session:
            raise ValueError("a kept session on MQTT 5 needs a session expiry: not supported here")
        c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id, protocol=mqtt.MQTTv5)
    else:
        c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id, clean_session=clean_session)
    if user is not None:
        c.username_pw_set(user, password)
    elif password is not None:
        raise ValueError("a password needs a user name (MQTT-3.1.2-22)")
    if tls[0]:
        c.tls_set(ca_certs=tls[0], certfile=tls[1], keyfile=tls[2])
    return c


def connect_and_wait(c, host, port, answered, error, timeout):
    """Connect c, start its network thread and wait for `answered` (an Event the client's
    callbacks set on SUBACK or a refusal) -> why it failed (error(): what the callbacks kept,
    or no answer in time), or None. A refused client says why at once, not after the timeout."""
    try:
        c.connect(host, port, keepalive=30)
    except OSError as e:
        return "cannot reach the broker: %s" % e
    fd = c.socket().fileno() if c.socket() else -1
    if fd >= 1024:  # paho's network loop would die on its first select(), and say nothing
        c.disconnect()
        return (
            "this client's socket is file descriptor %d, and paho-mqtt's select() takes none past "
            "1023: connect it before this process opens so many files" % fd
        )
    c.loop_start()
    if not answered.wait(timeout):
        return "no SUBACK within %s s%s" % (timeout, " (%s)" % error() if error() else "")
    return error()


def disconnect(c):
    """Disconnect a client from paho_client() and stop its network thread (c may be None)."""
    if c is not None:
        c.disconnect()
        c.loop_stop()


class Subscriber:
    """What a host service that subscribes does at CONNACK and SUBACK (paho 2.x callbacks,
    shared by the collector and the update service): a refusal, or a refused subscription, is
    kept in .error and .answered is set, so that connect_and_wait() returns at once with it.
    The service sets .answered (an Event), .error and .connected, and says what it subscribes
    to in subscriptions() -> [(topic filter, qos)]."""

    def subscriptions(self):
        raise NotImplementedError

    def _on_connect(self, client, userdata, flags, rc, props):
        if rc != 0:
            self.error = "refused the connection: %s" % rc  # paho names the return code
            self.answered.set()
            return
        self.connected = True
        client.subscribe(self.subscriptions())  # again after every reconnect: cheap, and safe

    def _on_subscribe(self, client, userdata, mid, codes, props):
        subs = self.subscriptions()
        bad = [(subs[i][0], c) for i, c in enumerate(codes) if c.is_failure]
        self.error = "refused the subscription to %s: %s" % bad[0] if bad else None
        self.answered.set()

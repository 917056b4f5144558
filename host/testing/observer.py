"""An independent MQTT party for tests: a paho-mqtt 2.x client (its own network
thread) connected to a broker, recording every message that arrives and publishing
with completion. Waits have deadlines and fail with what did arrive."""

import itertools
import os
import threading

_ids = itertools.count(1)


class Observer:
    """messages: [(topic, payload bytes, qos, retain), ...] in arrival order.

    After a lost connection paho reconnects by itself; the observer then renews
    its subscriptions, so it keeps working across a broker restart (messages sent
    while it was away are lost unless clean_session=False and the broker kept them).
    """

    def __init__(
        self,
        host,
        port,
        client_id=None,
        tls_ca=None,
        username=None,
        password=None,
        clean_session=True,
        keepalive=30,
        timeout=10,
        tls_cert=None,
        tls_key=None,
    ):
        import paho.mqtt.client as mqtt  # here, so the rig loads without paho

        self._mqtt = mqtt
        self.host, self.port = host, port
        # pid + counter + random: unique across xdist workers and reused brokers.
        self.client_id = client_id or "fw-observer-%d-%d-%s" % (os.getpid(), next(_ids), os.urandom(2).hex())
        self.timeout = timeout
        self.messages = []
        self.session_present = None
        self._cv = threading.Condition()
        self._connected = False  # CONNACK in and subscriptions renewed
        self._renew_mid = None
        self._connect_result = None
        self._subscriptions = {}  # filter -> qos, renewed on reconnect
        self._subacks = {}  # mid -> [granted qos or 0x80] (UNSUBACK: [])
        self._closed = False
        c = self.client = mqtt.Client(
            mqtt.CallbackAPIVersion.VERSION2,
            client_id=self.client_id,
            clean_session=clean_session,
            protocol=mqtt.MQTTv311,
        )
        c.reconnect_delay_set(0.1, 1)  # a restarted broker is back within a second
        if username is not None:
            c.username_pw_set(username, password)
        if tls_ca:  # with tls_cert/tls_key: mutual TLS, the certificate's CN is the identity
            c.tls_set(
                ca_certs=os.fspath(tls_ca),
                certfile=tls_cert and os.fspath(tls_cert),
                keyfile=tls_key and os.fspath(tls_key),
            )
        c.on_connect = self._on_connect
        c.on_disconnect = self._on_disconnect
        c.on_message = self._on_message
        c.on_subscribe = self._on_subscribe
        c.on_unsubscribe = self._on_subscribe  # same shape; mids never collide
        try:
            c.connect(host, port, keepalive=keepalive)
        except OSError as e:
            raise AssertionError(
                "observer %s could not reach %s:%s: %s" % (self.client_id, host, port, e)
            ) from e
        c.loop_start()
        try:
            with self._cv:
                if not self._cv.wait_for(lambda: self._connect_result is not None, timeout):
                    raise AssertionError(
                        "observer %s: no CONNACK from %s:%s within %s s"
                        % (self.client_id, host, port, timeout)
                    )
                if self._connect_result.is_failure:
                    raise AssertionError(
                        "observer %s: %s:%s refused the connection: %s"
                        % (self.client_id, host, port, self._connect_result)
                    )
        except BaseException:
            self.close()
            raise

    # ---- paho callbacks (its network thread)

    def _on_connect(self, client, userdata, flags, reason_code, properties):
        ok = not reason_code.is_failure
        with self._cv:
            self._connect_result = reason_code
            if ok:
                self.session_present = bool(flags.session_present)
            subs = list(self._subscriptions.items())
            self._connected = ok and not subs
            self._cv.notify_all()
        if ok and subs:
            # A reconnect: renew what a clean session dropped; connected once the
            # SUBACK is in (it is handled on this same thread, after this returns).
            self._renew_mid = client.subscribe(subs)[1]

    def _on_disconnect(self, client, userdata, flags, reason_code, properties):
        with self._cv:
            self._connected = False
            self._cv.notify_all()

    def _on_message(self, client, userdata, m):
        with self._cv:
            self.messages.append((m.topic, bytes(m.payload), m.qos, bool(m.retain)))
            self._cv.notify_all()

    def _on_subscribe(self, client, userdata, mid, reason_codes, properties):
        with self._cv:
            if mid == self._renew_mid:
                self._renew_mid = None
                self._connected = True
            else:
                self._subacks[mid] = [rc.value for rc in reason_codes]
            self._cv.notify_all()

    # ---- test API

    @property
    def connected(self):
        """Connected, with its subscriptions in place."""
        return self._connected

    def wait_connected(self, timeout=None):
        """Wait until (re)connected with subscriptions renewed, e.g. after a broker restart."""
        timeout = self.timeout if timeout is None else timeout
        with self._cv:
            if not self._cv.wait_for(lambda: self._connected, timeout):
                raise AssertionError(
                    "observer %s not connected to %s:%s within %s s"
                    % (self.client_id, self.host, self.port, timeout)
                )

    def subscribe(self, topic_filter, qos=0, timeout=None):
        """Subscribe and wait for the SUBACK; -> the granted QoS. Fails on a refusal."""
        timeout = self.timeout if timeout is None else timeout
        rc, mid = self.client.subscribe(topic_filter, qos)
        if rc != self._mqtt.MQTT_ERR_SUCCESS:
            raise AssertionError(
                "observer could not send SUBSCRIBE %r: %s" % (topic_filter, self._mqtt.error_string(rc))
            )
        with self._cv:
            # The SUBACK may already be in: the callback files it under its mid.
            if not self._cv.wait_for(lambda: mid in self._subacks, timeout):
                raise AssertionError("observer: no SUBACK for %r within %s s" % (topic_filter, timeout))
            granted = self._subacks.pop(mid)[0]
            if granted >= 0x80:
                raise AssertionError("broker refused the subscription to %r" % topic_filter)
            self._subscriptions[topic_filter] = qos
        return granted

    def unsubscribe(self, topic_filter, timeout=None):
        timeout = self.timeout if timeout is None else timeout
        with self._cv:
            self._subscriptions.pop(topic_filter, None)
        rc, mid = self.client.unsubscribe(topic_filter)
        if rc != self._mqtt.MQTT_ERR_SUCCESS:
            raise AssertionError(
                "observer could not send UNSUBSCRIBE %r: %s" % (topic_filter, self._mqtt.error_string(rc))
            )
        with self._cv:
            if not self._cv.wait_for(lambda: mid in self._subacks, timeout):
                raise AssertionError("observer: no UNSUBACK for %r within %s s" % (topic_filter, timeout))
            del self._subacks[mid]

    def publish(self, topic, payload=b"", qos=0, retain=False, timeout=None):
        """Publish and wait until done: written (QoS 0), PUBACK (1) or PUBCOMP (2)."""
        timeout = self.timeout if timeout is None else timeout
        info = self.client.publish(topic, payload, qos=qos, retain=retain)
        try:
            info.wait_for_publish(timeout)
        except (ValueError, RuntimeError) as e:
            raise AssertionError("observer could not publish to %r: %s" % (topic, e)) from e
        if not info.is_published():
            raise AssertionError(
                "observer: publish to %r (QoS %d) not completed within %s s" % (topic, qos, timeout)
            )

    def wait_until(self, predicate, timeout=None):
        """Wait until predicate(messages) is true; -> a copy of the messages."""
        timeout = self.timeout if timeout is None else timeout
        with self._cv:
            if not self._cv.wait_for(lambda: predicate(self.messages), timeout):
                raise AssertionError(
                    "observer %s: condition not met within %s s; %d message(s) "
                    "arrived: %s" % (self.client_id, timeout, len(self.messages), _show(self.messages))
                )
            return list(self.messages)

    def wait_for(self, count, timeout=None):
        """Wait for `count` messages; -> the first `count` (look at .messages for more)."""
        timeout = self.timeout if timeout is None else timeout
        try:
            return self.wait_until(lambda m: len(m) >= count, timeout)[:count]
        except AssertionError as e:
            raise AssertionError("expected %d message(s): %s" % (count, e)) from None

    def clear(self):
        with self._cv:
            del self.messages[:]

    def close(self):
        """Disconnect cleanly (no will) and stop the network thread. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            self.client.disconnect()
        finally:
            self.client.loop_stop()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return "<Observer %s %s:%s>" % (self.client_id, self.host, self.port)


def _show(messages, limit=20):
    shown = ", ".join(
        "(%r, %r, qos=%d%s)" % (t, p[:60], q, ", retain" if r else "") for t, p, q, r in messages[:limit]
    )
    return "[%s%s]" % (shown, ", ..." if len(messages) > limit else "")

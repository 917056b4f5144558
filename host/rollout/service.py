"""The update service: offers releases to boards and serves their chunks over MQTT, and
watches the fleet's vitals for what each board makes of it (fleetwire.ota on the board).

Topics (inside the fleet identity ACL of `fleetwire broker-config`; this service logs in
as the operator, who reads fleet/# and alone publishes fleet/+/ota/#):
  fleet/<id>/ota/offer   the manifest, signed, retained (the release the board should run); an
                         empty retained message withdraws it; {"op": "revert", "version",
                         "rollback"} orders a board back to the release before
  fleet/<id>/ota/keys    a key update, signed, retained: the release-signing keys boards trust
                         (fleetwire.host.identity.signing)
  fleet/<id>/ota_get     a board's request: tag (8 bytes, the SHA-256's first), offset (u32),
                         chunk length (u16), count (u16), big-endian
  fleet/<id>/ota/chunk   the answer, QoS 1: tag + offset (u32) + up to `chunk` bytes; an answer
                         with no data says the image ends at that offset
  fleet/<id>/telemetry   the boards' vitals: fw_version and the "ota" member (state, version,
                         done, size, code, reason)

One paho-mqtt client (its own network thread) does all of it."""

import json
import os
import struct
import threading
import time

from fleetwire.host.identity.login import Subscriber, connect_and_wait, disconnect, paho_client

MAX_COUNT = 64  # chunks per request at most: a board asks for a window, not the image


class ServiceError(RuntimeError):
    """The service could not start (the broker refused it, or could not be reached)."""


class Device:
    """What the service knows of one board: its last vitals record, when it came, requests."""

    def __init__(self, device_id):
        self.id = device_id
        self.record = None
        self.seen = None
        self.fw_version = None
        self.ota = {}
        self.requests = 0
        self.bytes_sent = 0

    def __repr__(self):
        return "Device(%s, %s, %s)" % (self.id, self.fw_version, self.ota.get("state"))


class UpdateService(Subscriber):
    """UpdateService(host, port, client_id="fleetwire-rollout", tls_ca=None, tls_cert=None,
    tls_key=None, user=None, password=None, watch=True, signer=None).

    add(release, data=None) serves a release (`data`: the bytes served, by default the
    release's own: a test serves something else); offer(ids, release), withdraw(ids),
    revert(ids, version, replaces), publish_keys(ids, update); devices[id] (Device) says what
    each board reported. `signer` (fleetwire.host.identity.signing.Signer) signs offers and orders
    back; without one they go unsigned, and a board refuses them. `before_serve`
    (a test's hook) is called with (device_id, offset, count) before a request is answered and
    may return False to leave it unanswered."""

    def __init__(
        self,
        host,
        port,
        client_id="fleetwire-rollout",
        tls_ca=None,
        tls_cert=None,
        tls_key=None,
        user=None,
        password=None,
        watch=True,
        signer=None,
    ):
        self.host, self.port = host, port
        self.signer = signer
        self.client_id = client_id
        self.tls = (tls_ca, tls_cert, tls_key)
        self.user, self.password = user, password
        self.watch = watch
        self.devices = {}
        self.releases = {}  # tag -> (Release, bytes served)
        self.before_serve = None
        self.served = 0  # chunks published
        self.requests = 0
        self.unknown = 0  # requests for a release this service does not have
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._client = None
        self.answered = threading.Event()
        self.connected = False
        self.error = None

    # ---- life

    def start(self, timeout=10):
        c = paho_client(self.client_id, True, self.user, self.password, self.tls)
        c.max_inflight_messages_set(100)
        c.on_connect = self._on_connect
        c.on_message = self._on_message
        c.on_subscribe = self._on_subscribe
        self._client = c
        why = connect_and_wait(c, self.host, self.port, self.answered, lambda: self.error, timeout)
        if why:
            self.stop()
            raise ServiceError("broker %s:%d: %s" % (self.host, self.port, why))
        return self

    def stop(self):
        c, self._client = self._client, None
        disconnect(c)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def subscriptions(self):
        return [("fleet/+/ota_get", 0)] + ([("fleet/+/telemetry", 1)] if self.watch else [])

    # ---- offering

    def add(self, release, data=None):
        self.releases[release.tag] = (release, release.data if data is None else bytes(data))

    def _publish(self, topic, payload, qos=1, retain=False):
        info = self._client.publish(topic, payload, qos=qos, retain=retain)
        return info

    def _signed(self, manifest):
        if self.signer is None:
            return json.dumps(manifest, separators=(",", ":")).encode()
        return self.signer.sign(manifest)

    def offer(self, device_ids, release, retry=False, manifest=None, wait=True, payload=None):
        """Offer `release` to each board (retained, QoS 1), signed, and serve it. `manifest` (a
        dict) replaces the release's own, `payload` (bytes) the whole signed message: a test
        offers a wrong one, or a forged one."""
        if release.tag not in self.releases:
            self.add(release)
        if payload is None:
            payload = self._signed(manifest or release.manifest(**({"retry": True} if retry else {})))
        self._all(device_ids, "offer", payload, wait)

    def _all(self, device_ids, topic, payload, wait):
        infos = [self._publish("fleet/%s/ota/%s" % (d, topic), payload, 1, True) for d in device_ids]
        if wait:
            for i in infos:
                i.wait_for_publish(10)

    def publish_keys(self, device_ids, update, wait=True):
        """Send each board a key update (retained: a board offline now takes it when it is back):
        ReleaseKeys.update(), signed already."""
        self._all(device_ids, "keys", update, wait)

    def withdraw(self, device_ids, wait=True):
        """Take the offer back (an empty retained message): a board that has not switched stops."""
        self._all(device_ids, "offer", b"", wait)

    def revert(self, device_ids, version, replaces, wait=True):
        """Order each board back to `version`, the release its last update replaced, from
        `replaces`, the one it runs (retained: a board offline now goes back when it returns;
        signed, and naming what it replaces, so that it cannot be replayed later)."""
        m = {"v": 1, "op": "revert", "version": version, "rollback": replaces}
        self._all(device_ids, "offer", self._signed(m), wait)

    # ---- messages

    def _on_message(self, client, userdata, m):
        parts = m.topic.split("/")
        if len(parts) != 3 or parts[0] != "fleet":
            return
        if parts[2] == "ota_get":
            self._request(parts[1], m.payload)
        elif parts[2] == "telemetry":
            self._record(parts[1], m.payload)

    def _device(self, device_id):
        d = self.devices.get(device_id)
        if d is None:
            d = self.devices[device_id] = Device(device_id)
        return d

    def _record(self, device_id, payload):
        try:
            rec = json.loads(payload)
        except ValueError:
            return
        if not isinstance(rec, dict) or rec.get("device_id") != device_id:
            return
        with self._changed:
            d = self._device(device_id)
            if (
                d.record is not None
                and rec.get("seq", 0) < d.record.get("seq", 0)
                and rec.get("boot_id", 0) <= d.record.get("boot_id", 0)
            ):
                return  # an older record, sent late from a store: the newer one stands
            d.record = rec
            d.seen = time.time()
            d.fw_version = rec.get("fw_version")
            ota = rec.get("ota")
            d.ota = ota if isinstance(ota, dict) else {}
            self._changed.notify_all()

    def _request(self, device_id, payload):
        self.requests += 1
        if len(payload) != 16:
            return
        tag = payload[:8]
        offset, chunk, count = struct.unpack(">IHH", payload[8:])
        with self._lock:
            d = self._device(device_id)
            d.requests += 1
        got = self.releases.get(tag)
        if got is None:
            self.unknown += 1
            return
        if self.before_serve is not None and self.before_serve(device_id, offset, count) is False:
            return
        release, data = got
        chunk = max(1, min(chunk, release.chunk))
        topic = "fleet/%s/ota/chunk" % device_id
        for i in range(min(count, MAX_COUNT)):
            o = offset + i * chunk
            piece = data[o : o + chunk]
            self._publish(topic, tag + struct.pack(">I", o) + piece, 1)
            self.served += 1
            d.bytes_sent += len(piece)
            if not piece or o + chunk >= len(data):
                break  # the end (an empty piece says so when the board asks past it)

    # ---- waiting

    def wait(self, cond, timeout):
        """Wait until cond(devices) is true (checked on every record) -> whether it came true."""
        end = time.monotonic() + timeout
        with self._changed:
            while not cond(self.devices):
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(min(left, 0.5))
            return True


def credentials_from_env():
    """(user, password) from $FLEETWIRE_MQTT_USER / $FLEETWIRE_MQTT_PASSWORD (None when unset)."""
    return os.environ.get("FLEETWIRE_MQTT_USER"), os.environ.get("FLEETWIRE_MQTT_PASSWORD")

# TLS, as on current MicroPython: the broker's certificate and host name are checked.
import ssl

from fleetwire import MQTTClient

ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
ctx.verify_mode = ssl.CERT_REQUIRED
with open("ca.der", "rb") as f:
    ctx.load_verify_locations(cadata=f.read())
c = MQTTClient("sensor-17", "broker.local", ssl=ctx)  # port 8883 unless given
c.connect()
c.publish("fleet/sensor-17/status", b"online over TLS", qos=1)
c.disconnect()
print("published over TLS")

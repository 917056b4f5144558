# The vitals agent: one JSON record a period to fleet/<id>/telemetry at QoS 1.
from fleetwire import MQTTClient
from fleetwire.vitals import Vitals

c = MQTTClient("sensor-17", "broker.local", keepalive=30, reconnect=True, store="store")
v = Vitals(c, "sensor-17", "1.5.0", period_s=60, state="vitals.json")
print("boot", v.boot())  # boot_id + 1; why it started (power_on, deliberate, panic, ...)
c.connect(clean_session=False)
while not v.acked:  # a device loops for ever; this example stops at the first record
    v.step()  # a record when one is due
    c.loop(100)
print("record acknowledged")
# to restart on purpose: v.deliberate_reset() marks it on flash first, so it is no crash

from fleetwire import MQTTClient  # was: from umqtt.simple import MQTTClient

got = []


def on_msg(topic, msg):  # bytes, bytes: as umqtt.simple
    got.append((topic, msg))


c = MQTTClient("sensor-17", "broker.local", keepalive=60)
c.set_last_will("fleet/sensor-17/status", "offline", retain=True, qos=1)
c.set_callback(on_msg)
c.connect()
c.subscribe("fleet/sensor-17/cmd/#", qos=2)
c.publish("fleet/sensor-17/cmd/led", b"on", qos=1)  # waits for PUBACK, like umqtt
c.publish("fleet/sensor-17/cmd/led", b"off", qos=2)  # QoS 2 works (umqtt asserts)
while len(got) < 2:
    c.wait_msg()  # or c.check_msg(), or c.loop(timeout_ms)
c.disconnect()
print(got)

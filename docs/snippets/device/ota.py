# Over-the-air updates in a program of your own (the board's main.py does this when
# config.json says "ota": true).
from fleetwire import MQTTClient
from fleetwire.ota import agent as ota
from fleetwire.vitals import Vitals


def my_callback(topic, msg):
    print("mine:", topic, msg)


c = MQTTClient("sensor-17", "broker.local", reconnect=True, store="store")
v = Vitals(c, "sensor-17", "1.4.2")
v.boot()
c.connect(clean_session=False)
u = ota.enable(  # your messages still go to your callback
    c, "sensor-17", vitals=v, callback=my_callback, cfg={"ota_confirm_s": 120, "fw_version": "1.4.2"}
)
for _ in range(5):  # a device loops for ever
    v.step()
    u.step()  # timers, the check and switch of a finished download, the trial
    c.loop(200)
print("updater idle:", u.state == ota.IDLE)

# Messages that survive a reset: every QoS 1/2 message is on flash before publish() returns.
import esp32

from fleetwire import MQTTClient
from fleetwire.ring.store import RingStore

part = esp32.Partition.find(esp32.Partition.TYPE_DATA, label="mqtt")[0]
c = MQTTClient("sensor-17", "broker.local", store=RingStore(part), reconnect=True)
c.connect(clean_session=False)
for i in range(10):
    c.publish(b"fleet/sensor-17/log", b"entry %d" % i, qos=1, block=False)  # on flash from here on
while c.pending:
    c.loop(50)
print("stored and sent; backlog", c.store.backlog)

# A message longer than max_packet comes in pieces of at most max_packet bytes;
# client.rest is the number of bytes still to come after the piece in hand.
from fleetwire import MQTTClient

sender = MQTTClient("sensor-17-tx", "broker.local", max_packet=4096)
sender.connect()
client = MQTTClient("sensor-17", "broker.local", max_packet=256)
f = open("image.bin", "wb")
pieces = []


def cb(topic, msg):
    f.write(msg)  # each piece, in order
    pieces.append(len(msg))
    if not client.rest:  # the last (or only) piece
        f.close()


client.set_callback(cb)
client.connect()
client.subscribe("fleet/sensor-17/image", qos=1)
sender.publish("fleet/sensor-17/image", b"x" * 3000, qos=1)
while not pieces or client.rest:
    client.wait_msg()
print(sum(pieces), "bytes in", len(pieces), "pieces")

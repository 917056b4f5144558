# Written against umqtt.simple's documented API: poll with check_msg().
import sys
import time
from umqtt.simple import MQTTClient

server, port, topic = sys.argv[1], int(sys.argv[2]), sys.argv[3]
user, password = (sys.argv[4:6] + [None, None])[:2]  # a login, if the broker wants one
got = []


def sub_cb(topic, msg):
    got.append((topic, msg))


c = MQTTClient(b"umqtt-check", server, port, user, password)
c.set_callback(sub_cb)
c.connect()
c.subscribe(topic.encode())
print("subscribed")
for _ in range(500):
    c.check_msg()
    if got:
        break
    time.sleep(0.01)
print(got[0][0].decode(), got[0][1].decode())
c.disconnect()

# Written against umqtt.simple's documented API: block in wait_msg(), QoS 1 subscription.
import sys
from umqtt.simple import MQTTClient

server, port, topic = sys.argv[1], int(sys.argv[2]), sys.argv[3]
user, password = (sys.argv[4:6] + [None, None])[:2]  # a login, if the broker wants one


def sub_cb(topic, msg):
    print(topic.decode(), msg.decode())


c = MQTTClient(b"umqtt-wait", server, port, user, password, keepalive=60)
c.set_callback(sub_cb)
c.connect()
c.subscribe(topic.encode(), qos=1)
print("subscribed")
c.wait_msg()
c.disconnect()

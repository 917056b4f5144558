# Written against umqtt.simple's documented API: connect, publish, disconnect.
import sys
from umqtt.simple import MQTTClient

server, port, topic = sys.argv[1], int(sys.argv[2]), sys.argv[3]
user, password = (sys.argv[4:6] + [None, None])[:2]  # a login, if the broker wants one
c = MQTTClient(b"umqtt-pub", server, port, user, password)
c.connect()
c.publish(topic.encode(), b"hello from umqtt code")
c.publish(topic.encode(), b"retained", retain=True)
c.publish(topic.encode(), b"at least once", qos=1)
c.disconnect()
print("published")

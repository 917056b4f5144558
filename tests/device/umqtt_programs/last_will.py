# Written against umqtt.simple's documented API: a last will, a ping, then die without DISCONNECT.
import sys
from umqtt.simple import MQTTClient

server, port, topic = sys.argv[1], int(sys.argv[2]), sys.argv[3]
user, password = (sys.argv[4:6] + [None, None])[:2]  # a login, if the broker wants one
c = MQTTClient(b"umqtt-lwt", server, port, user, password, keepalive=30)
c.set_last_will(topic.encode(), b"offline", retain=False, qos=1)
c.connect()
c.ping()
c.wait_msg()  # the PINGRESP
print("pinged")
c.sock.close()  # gone without DISCONNECT: the broker publishes the will

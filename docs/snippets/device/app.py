# app.py: a board's own application. fleetwire's main.py imports it and calls
# setup(client) once connected, then step(client) on every turn of its loop.
import json

from fleetwire import crash

with open("config.json") as f:
    ME = json.load(f)["device_id"]
_client = None


def on_msg(topic, msg):
    # fleet/<id>/cmd/led -> the LED's new state, reported on fleet/<id>/led
    crash.log(msg)  # in the crash record's log, should the board crash soon after
    _client.publish("fleet/%s/led" % ME, msg, qos=1, block=False)


def setup(client):
    global _client
    _client = client
    client.set_callback(on_msg)
    client.subscribe("fleet/%s/cmd/led" % ME, 1)
    print("app: ready")


def step(client):
    pass  # read sensors, publish: never block here for long

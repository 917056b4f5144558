# A board program for tests/identity: the client with a store and the board's TLS identity
# (fleetwire.identity), as the runner builds them from config.json.
#   micropython identity_program.py CONFIG.json [FIXED.json]
# Queues three QoS 1 messages in the store, then connects. A refusal prints
# "REFUSED <class> <text>"; with FIXED.json (the same board with a usable identity) it then
# connects with that, as the board does after a deploy mends it. "CONNECTED", then "SENT n"
# once the store has no message left to send.
import sys
import json
from fleetwire import MQTTClient
from fleetwire.identity import Context

cfg = json.load(open(sys.argv[1]))
c = MQTTClient(
    cfg["device_id"],
    cfg["broker"],
    cfg["port"],
    ssl=Context(cfg),
    reconnect=True,
    store=cfg["store"],
    timeout=5,
)
topic = "fleet/%s/telemetry" % cfg["device_id"]
for i in range(3):
    c.publish(topic, "queued-%d" % i, qos=1, block=False)
try:
    c.connect(clean_session=False)
except OSError as e:
    print("REFUSED", type(e).__name__, e)
    if len(sys.argv) < 3:
        sys.exit(0)
    c.ssl = Context(json.load(open(sys.argv[2])))
    c.connect(clean_session=False)
print("CONNECTED")
for _ in range(200):
    if not c.pending:
        break
    c.loop(20)
print("SENT", 3 - c.pending)
c.disconnect()

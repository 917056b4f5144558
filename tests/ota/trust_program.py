# Signed releases on MicroPython: fleetwire.ota's Updater in the working directory (its records
# under ota/, as on a board: ota/keys.json holds the keys it trusts), fed the messages a test
# wrote, with the chunks of the image a test chose served to it as the update service would.
#
#   micropython trust_program.py STEPS RUNNING
# STEPS: a JSON file, a list of steps:
#   ["keys", FILE]           a key update arrives on fleet/<id>/ota/keys
#   ["offer", FILE, IMAGE]   an offer arrives on fleet/<id>/ota/offer; IMAGE (a file, or null) is
#                            what the service serves for it
#   ["boot"]                 the board starts again: a new Updater; a release on trial connects and
#                            its first vitals record is acknowledged (confirmed)
# RUNNING: the release deployed (config.json's fw_version). After each step one line:
#   STEP {"state", "version", "code", "reason", "switched": a restart was asked for, "asked":
#   requests for chunks, "running": the release that runs, "seq": the key set's number,
#   "loaded": the fleetwire.ota modules loaded, "heap": bytes in use after a collection}
import gc
import json
import sys

import fleetwire.ota.agent as ota

STEPS = json.load(open(sys.argv[1]))
RUNNING = sys.argv[2]


class Vitals:
    # what the updater asks of the vitals agent: a record acknowledged (the trial's end)
    acked = True

    def room(self, n):
        pass

    def publish(self):
        pass


asks = []
restarts = []
sent = [0]


def send(topic, payload):
    asks.append(bytes(payload))
    sent[0] += 1


def make():
    u = ota.Updater(
        "sig-1",
        send,
        Vitals(),
        max_packet=2048,
        window=4,
        kind="esp32",
        running=RUNNING,
        restart=lambda: restarts.append(1),
    )
    u.log = lambda *a: print("LOG", *a)
    return u


def serve(u, image):
    # the update service: each request answered from the image, until the updater asks no more
    data = open(image, "rb").read() if image else b""
    guard = 0
    while asks or u.verify_due or u.restart_due or (u.held is not None and not u.st.get("trial")):
        guard += 1
        if guard > 5000:
            raise AssertionError("the update does not finish")
        while asks:
            r = asks.pop(0)
            o = int.from_bytes(r[8:12], "big")
            c = int.from_bytes(r[12:14], "big")
            for i in range(int.from_bytes(r[14:16], "big")):
                p = o + i * c
                piece = data[p : p + c]
                u.handle(u.t_chunk, r[:8] + p.to_bytes(4, "big") + piece)
                if not piece or p + c >= len(data):
                    break
        u.step()
    return data


def report(u, asked):
    st = u.states.load("boot") or {}
    keys = u.states.load("keys") or {}
    gc.collect()
    out = {
        "state": ota.NAMES[u.state],
        "version": json.loads(u.version),
        "code": json.loads(u.code),
        "reason": json.loads(u.reason),
        "switched": bool(restarts),
        "asked": asked,
        "running": st.get("version") or RUNNING,
        "seq": keys.get("seq"),
        "loaded": sorted(k[10:] for k in sys.modules if k.startswith("fleetwire.ota")),
        "heap": gc.mem_alloc(),
    }
    print("STEP", json.dumps(out))


u = make()
image = None  # what the service serves: the last offer's image (an offer parked for its key too)
for step in STEPS:
    sent[0] = 0
    del restarts[:]
    if step[0] == "boot":
        u = make()
        u.step()  # the trial's first record is acknowledged: confirmed
    else:
        msg = open(step[1], "rb").read()
        u.handle(u._prefix + (b"keys" if step[0] == "keys" else b"offer"), msg)
        msg = None
        if step[0] == "offer":
            image = step[2]
        serve(u, image)
    report(u, sent[0])

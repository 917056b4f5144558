"""Hardware-in-the-loop tests: fleetwire deployed to a board and run as it runs in the
field (boot.py, main.py, config.json). Without --board they run on a virtual board;
with `--board PORT --board-broker HOST:PORT` on a real one (see docs/guides/hil.md)."""

import json
import time

from fleetwire.host.fleet.crashrec import parse
from fleetwire.host.testing.hil import device_config, wait

ECHO_APP = """
# echo the command fleet/<id>/cmd/echo back on fleet/<id>/echo, at the QoS it came with
import json
cfg = json.load(open("config.json"))
IN = "fleet/%s/cmd/echo" % cfg["device_id"]
OUT = "fleet/%s/echo" % cfg["device_id"]
_c = None

def _echo(topic, msg):
    _c.publish(OUT, msg, qos=_c.qos, block=False)

def setup(client):
    global _c
    _c = client
    client.set_callback(_echo)
    client.subscribe(IN, 2)
    print("app: echoing", IN)
"""


def records(observer, device_id):
    return [json.loads(m[1]) for m in observer.messages if m[0] == "fleet/%s/telemetry" % device_id]


def test_the_board_boots_connects_and_reports_its_vitals(hil_board, hil_broker, hil_observer, request):
    cfg = device_config(request, hil_broker)
    hil_observer.subscribe("fleet/%s/telemetry" % cfg["device_id"], 1)
    res = hil_board.deploy(cfg)
    assert "config.json" in res["copied"] and "main.py" in res["copied"]
    hil_board.console_until("main: connected")
    assert wait(lambda: len(records(hil_observer, cfg["device_id"])) >= 2)
    r = records(hil_observer, cfg["device_id"])
    assert r[0]["device_id"] == cfg["device_id"] and r[0]["fw_version"] == "hil" and r[0]["period_s"] == 1
    assert [x["seq"] for x in r[:2]] == [r[0]["seq"], r[0]["seq"] + 1]


def test_publish_and_subscribe_round_trip_at_every_qos(hil_board, hil_broker, hil_observer, request):
    cfg = device_config(request, hil_broker, period_s=3600)
    hil_board.put("app.py", ECHO_APP)  # main.py imports it when the board starts
    hil_board.deploy(cfg)
    hil_board.console_until("app: echoing")
    out = "fleet/%s/echo" % cfg["device_id"]
    hil_observer.subscribe(out, 2)
    for qos in (0, 1, 2):
        hil_observer.publish("fleet/%s/cmd/echo" % cfg["device_id"], b"ping-%d" % qos, qos=qos)
    got = hil_observer.wait_until(lambda m: len([x for x in m if x[0] == out]) >= 3, 20)
    echoes = sorted((m[1], m[2]) for m in got if m[0] == out)
    assert echoes == [(b"ping-0", 0), (b"ping-1", 1), (b"ping-2", 2)]


def test_records_in_the_store_survive_a_reboot_and_go_out_after_it(
    hil_board, hil_broker, hil_observer, request
):
    cfg = device_config(request, hil_broker)
    hil_observer.subscribe("fleet/%s/telemetry" % cfg["device_id"], 1)
    hil_board.deploy(cfg)
    hil_board.console_until("main: connected")
    hil_board.set_wlan(False)  # offline: records pile up on flash
    hil_board.console_until("Wi-Fi lost")
    n_before = len(records(hil_observer, cfg["device_id"]))
    time.sleep(3)  # ~3 records made offline
    hil_board.power_cycle()  # power cut with them in the store
    hil_board.set_wlan(True)
    hil_board.console_until("main: connected")
    assert wait(lambda: len(records(hil_observer, cfg["device_id"])) >= n_before + 4, 30)
    r = records(hil_observer, cfg["device_id"])
    seqs = sorted({x["seq"] for x in r})
    assert seqs == list(range(seqs[0], seqs[-1] + 1)), "records lost across the reboot: %s" % seqs
    assert {x["boot_id"] for x in r} >= {r[0]["boot_id"], r[0]["boot_id"] + 1}


def test_a_wifi_drop_delays_records_and_loses_none(hil_board, hil_broker, hil_observer, request):
    cfg = device_config(request, hil_broker)
    hil_observer.subscribe("fleet/%s/telemetry" % cfg["device_id"], 1)
    hil_board.deploy(cfg)
    hil_board.console_until("main: connected")
    hil_board.set_wlan(False)
    hil_board.console_until("Wi-Fi lost")
    time.sleep(3)
    hil_board.set_wlan(True)
    hil_board.console_until("Wi-Fi back")
    assert wait(lambda: len(records(hil_observer, cfg["device_id"])) >= 6, 20)
    seqs = [x["seq"] for x in records(hil_observer, cfg["device_id"])]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), "lost or out of order: %s" % seqs


def test_a_second_deploy_copies_nothing_and_keeps_the_boards_key(hil_board, hil_broker, request):
    cfg = device_config(request, hil_broker)
    first = hil_board.deploy(cfg)
    second = hil_board.deploy(cfg)
    assert first["copied"] and second["copied"] == [] and second["unchanged"] == len(first["copied"])
    if hil_board.ca is not None:
        assert (first["identity"], second["identity"]) == ("issued", "kept")
    cfg["period_s"] = 30
    third = hil_board.deploy(cfg)
    assert third["copied"] == ["config.json"]


CRASH_APP = """
# fails once: the third step of the first boot divides by zero
from fleetwire import crash
import os
n = 0
def setup(client):
    print("app: up")
def step(client):
    global n
    n += 1
    crash.log("step %d" % n)
    if n == 3 and "crashed" not in os.listdir():
        open("crashed", "w").close()
        reading(0)
def reading(x):
    return 100 // x
"""


def test_a_crash_in_the_app_is_recorded_reset_and_landed_once(hil_board, hil_broker, hil_observer, request):
    cfg = device_config(request, hil_broker, fw_version="3.1.0")
    cfg["crash_print"] = True  # print() feeds the log ring too
    topic = "fleet/%s/crash" % cfg["device_id"]
    hil_observer.subscribe(topic, 1)
    hil_observer.subscribe("fleet/%s/telemetry" % cfg["device_id"], 1)
    hil_board.put("app.py", CRASH_APP)
    hil_board.deploy(cfg)
    w = hil_board.watch()
    w.wait_for("main: crashed", 30)  # recorded, then the runner resets the board
    # (its first boot says most: once, under load, every boot crashed with a MemoryError after it)
    assert wait(lambda: [m for m in hil_observer.messages if m[0] == topic], 30), w.text[:4000]
    time.sleep(1.5)  # a second copy would come by now
    recs = [parse(m[1], cfg["device_id"]) for m in hil_observer.messages if m[0] == topic]
    (r,) = {(x["device_id"], x["boot_id"], x["crash_id"]): x for x in recs}.values()  # one key
    assert (r["kind"], r["type"], r["fw_version"]) == ("exception", "ZeroDivisionError", "3.1.0")
    assert r["traceback"].rstrip().endswith("ZeroDivisionError: divide by zero")
    assert ", in step\n" in r["traceback"] and ", in reading\n" in r["traceback"]
    assert "app: up" in r["log"] and r["log"][-3:] == ["step 1", "step 2", "step 3"]

    def next_boot():
        return [x for x in records(hil_observer, cfg["device_id"]) if x["boot_id"] == r["boot_id"] + 1]

    assert wait(next_boot, 10)
    assert next_boot()[0]["reset_cause"] == "panic"  # not the runner's reset: the crash before it

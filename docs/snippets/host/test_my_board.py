# A HIL test: runs on a virtual board, or on a real one with
# pytest --board PORT --board-broker HOST:PORT [--board-ca DIR]
import json

from fleetwire.host.testing.hil import device_config, wait


def test_the_board_reports_its_vitals(hil_board, hil_broker, hil_observer, request):
    cfg = device_config(request, hil_broker, period_s=1)  # a device id of its own, the broker
    topic = "fleet/%s/telemetry" % cfg["device_id"]
    hil_observer.subscribe(topic, 1)
    hil_board.deploy(cfg)  # as `fleetwire deploy --mpy`, with a certificate of its own
    hil_board.console_until("main: connected")
    assert wait(lambda: any(m[0] == topic for m in hil_observer.messages))
    record = json.loads(next(m[1] for m in hil_observer.messages if m[0] == topic))
    assert record["device_id"] == cfg["device_id"]

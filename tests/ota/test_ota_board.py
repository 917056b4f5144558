"""Over-the-air updates on a board (fleetwire.ota): a virtual board unless --board, the
board's own main.py and fleetwire.runner with "ota": true, a mosquitto that enforces fleet
identity, and the update service (fleetwire.host.otaserve) logged in as the operator."""


def test_an_app_update_reaches_the_board_over_the_broker_and_the_board_runs_it(ota_board, releases):
    b = ota_board
    b.deploy()
    b.wait_running("1.0.0")
    rel = releases("2.0.0")
    b.service.offer([b.id], rel)
    b.console.wait_for("app: release 2.0.0 running", 90)
    ota = b.wait_for("confirmed", "2.0.0")
    b.wait_running("2.0.0")
    assert ota["code"] is None and ota["reason"] is None
    # the board downloaded it once, in chunks no larger than the manifest's
    assert b.service.devices[b.id].bytes_sent == rel.size


"""The operator lands what it sends (Operator(landing=...), `fleetwire cmd|state --landing`):
the events the report's commands and convergence tables are made from
(fleetwire.host.analytics.commands), in the collector's line format."""

import glob
import json

from fleetwire.host.command.operator import Operator


def test_the_operator_lands_each_command_it_sends_and_each_boards_desired_version(mosquitto, tmp_path):
    land = tmp_path / "landing"
    with Operator(mosquitto.host, mosquitto.port, landing=str(land)) as op:
        sent = op.send(["ol-1", "ol-2"], "ping", deadline_s=60)
        versions = op.set_desired(["ol-1", "ol-2"], {"config": {"period_s": 30}})
        op.set_desired(["ol-1"], {"config": None})  # clean up the retained documents
        op.set_desired(["ol-2"], {"config": None})
    (path,) = glob.glob(str(land / "_commands" / "date=*" / ("%s.ndjson" % op.id)))
    lines = [json.loads(x) for x in open(path)]
    assert {(x["device_id"], x["body"]["id"]) for x in lines if x["kind"] == "sent"} == {
        (b, i) for i, b in sent.items()
    }
    assert all(x["body"]["name"] == "ping" and x["body"]["deadline"] for x in lines if x["kind"] == "sent")
    desired = [x for x in lines if x["kind"] == "desired"]
    assert [(x["device_id"], x["body"]["version"]) for x in desired[:2]] == sorted(versions.items())
    # one set_desired() call is one change, for all its boards; the next is another
    assert desired[0]["body"]["change"] == desired[1]["body"]["change"] != desired[2]["body"]["change"]
    assert all(isinstance(x["rx_ts"], int) for x in lines)

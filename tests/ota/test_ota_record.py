"""The update's state in the vitals record, on MicroPython: formatted into the record's own
buffer without allocating, as JSON the collector lands (the report ignores the member)."""

import json

from fleetwire.host.fleet.collector import check_record

PROGRAM = r"""
import gc, json
from fleetwire.vitals import Vitals, RamState
from fleetwire.ota import agent as ota
class B:
    def heap_free(self): return 50000
    def heap_min(self): return 40000
    def rssi(self): return -60
    def vbat_mv(self): return None
    def uptime_ms(self): return 1000
    def epoch_ms(self): return 1700000000000
    def reset_cause(self): return "power_on"
v = Vitals(None, "rec-1", "1.4.2", 60, state=RamState(), board=B())
v.boot()
class S:
    def load(self, k): return None
    def save(self, k, d): pass
    def remove(self, k): pass
u = ota.Updater("rec-1", lambda t, p: None, v, kind="esp32", states=S())
u.show(ota.DOWNLOADING, "1.5.0")
u.done, u.size = 40960, 81990
v.make()
def run(n):
    # bytes allocated by n records, less those of the same loop with none
    gc.collect()
    a = gc.mem_alloc()
    for _ in range(n):
        v.format()
    return gc.mem_alloc() - a
run(20)
print("ALLOC", run(100) - run(0))
print("REC", bytes(v.make()).decode())
u.show(ota.FAILED, "1.5.0", "sha256", "x" * 300 + '"quoted"\\')
print("REC", bytes(v.make()).decode())
"""


def test_the_update_state_rides_in_the_record_and_costs_no_allocation(mpy):
    r = mpy.exec(PROGRAM, heap="128K")
    lines = r.stdout.splitlines()
    assert "ALLOC 0" in lines, r.stdout  # 64-bit port: every number here is a small int
    recs = [json.loads(x[4:]) for x in lines if x.startswith("REC ")]
    assert recs[0]["ota"] == {
        "state": "downloading",
        "version": "1.5.0",
        "done": 40960,
        "size": 81990,
        "code": None,
        "reason": None,
    }
    # a long reason with quotes is cut and made safe, so the record's buffer always holds it
    assert recs[1]["ota"]["state"] == "failed" and recs[1]["ota"]["code"] == "sha256"
    assert len(recs[1]["ota"]["reason"]) == 200 and '"' not in recs[1]["ota"]["reason"]
    for rec in recs:
        assert check_record("fleet/rec-1/telemetry", json.dumps(rec).encode())[0] is not None

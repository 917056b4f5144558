"""The sans-IO session beyond its portable cases (tests/portable/session_cases.py, run on
both interpreters by tests/portable/test_portable.py)."""

import pytest


CUT_OFF_TOPIC = """
from fleetwire.session import Session
from fleetwire.feed import feed
s = Session(b"c", max_packet=128)
s.start(0)
feed(s, b"\\x20\\x02\\x00\\x00", 0)  # CONNACK
t = 60000  # a topic MQTT allows, longer than this heap can hold
n = 2 + t + 2 + 10
head = bytearray([0x32])  # PUBLISH, QoS 1
while n > 127:
    head.append(n & 127 | 128)
    n >>= 7
head.append(n)
try:
    feed(s, bytes(head) + bytes([t >> 8, t & 255]) + b"a/b/c", 0)
except MemoryError as e:
    print("ERROR", e)
print("PACKED", s.pack(0))
"""


@pytest.mark.micropython
def test_a_topic_the_heap_cannot_hold_raises_a_memory_error_that_says_so_and_is_not_acked(mpy):
    # a topic is held whole (MQTT caps it at 65,535 bytes); on a heap with no room for it the
    # error names the bytes wanted (header, topic and packet id), and the message is not
    # acknowledged: the broker sends it again (MemoryError is not a link error: the program
    # sees it, as any allocation that fails)
    r = mpy.exec(CUT_OFF_TOPIC, heap="64K")
    assert "ERROR no memory for 60008 bytes to read a received packet into" in r.stdout, r.stdout
    assert "PACKED 0" in r.stdout

"""Error texts live in two tables, the codec's (fleetwire.codec.reasons) and the client's
(fleetwire.reasons), loaded only when an error is raised: a board running the client
does not hold them in RAM, and an error still says what broke (and the rule it breaks)."""

import os
import re

import pytest

from fleetwire import reasons as client_reasons
from fleetwire.codec import packets5, reasons, reasons5, wire, wire5
from fleetwire.codec.errors import CodecError, rule
from fleetwire.codec.packets import PUBREC
from fleetwire.errors import ProtocolError
from fleetwire.session import Session
from fleetwire.feed import feed

from support import ROOT, sources

RULE = re.compile(r"^(MQTT-\d+\.\d+\.\d+-\d+|§\d+(\.\d+)*|-|\.)$")
# wire.py names an error by a constant, _KEY = const(its line in reasons.TEXT)
NUMBERED = (r"fail_as\(_([A-Z0-9_]+)", r"fail_as\(_\w+ if [^\n]* else _([A-Z0-9_]+)\)")
# (table, source folder, the calls that name a key)
TABLES = {
    "codec": (reasons.TEXT, "shared", (r'fail_as\("(\w+)"',) + NUMBERED),
    "client": (client_reasons.TEXT, "device", (r'\bsay\("(\w+)"', r"\bsay\(_([A-Z0-9_]+)")),
    # MQTT 5 (wire5, pack5: _KEY = const(line | code << 8); packets5 by key, some passed on)
    "mqtt5": (
        reasons5.TEXT,
        "shared",
        (r'fail5\("(\w+)"', r"\n_([A-Z0-9_]+) = const\(\d+ \| 0x", r'"(\w+_cut)"'),
    ),
}


def source(folder, name):
    with open(os.path.join(ROOT, folder, name), encoding="utf-8") as f:
        return f.read()


def keys_used(which):
    _, folder, patterns = TABLES[which]
    used = set()
    for name in sources(folder):
        src = source(folder, name)
        for p in patterns:
            used |= set(k.lower() if "A-Z" in p else k for k in re.findall(p, src))
    return used


def table(which):
    rows = {}
    for line in TABLES[which][0].strip("\n").split("\n"):
        key, rule, msg = line.split(None, 2)
        assert key not in rows, "key %s twice" % key
        rows[key] = (rule, msg)
    return rows


@pytest.mark.parametrize("which", sorted(TABLES))
def test_every_key_raised_has_a_line_and_every_line_is_used(which):
    assert keys_used(which) == set(table(which))


def line_number(key, text=reasons.TEXT):
    return [line.split()[0] for line in text.strip("\n").split("\n")].index(key) + 1


def test_the_client_names_each_error_by_the_number_of_its_line_and_holds_no_key_string():
    for name in sources("device"):
        src = source("device", name)
        numbers = {k.lower(): int(n) for k, n in re.findall(r"^_([A-Z0-9_]+) = const\((\d+)\)", src, re.M)}
        for key in {k.lower() for k in re.findall(r"\bsay\(_([A-Z0-9_]+)", src)}:
            assert numbers[key] == line_number(key, client_reasons.TEXT), (name, key)
        assert not re.findall(r'\bsay\("', src), name


def test_wire_names_each_error_by_the_number_of_its_line_and_holds_no_key_string():
    src = source("shared", "wire.py")
    numbers = {k.lower(): int(n) for k, n in re.findall(r"^_([A-Z0-9_]+) = const\((\d+)\)", src, re.M)}
    used = set()
    for p in NUMBERED:
        used |= {k.lower() for k in re.findall(p, src)}
    assert len(used) > 30
    for key in used:
        assert numbers[key] == line_number(key), key
    assert not re.findall(r'fail_as\("', src)


@pytest.mark.parametrize("which,key", [(w, k) for w in sorted(TABLES) for k in sorted(table(w))])
def test_every_line_names_a_rule_or_none_and_its_key_is_interned_on_a_board(which, key):
    rule, msg = table(which)[key]
    assert RULE.match(rule), rule
    # Strings of up to 10 characters are interned by mpy-cross (no object per use).
    assert len(key) <= 10


def test_a_message_is_formatted_with_the_packet_type_named_and_its_rule():
    with pytest.raises(CodecError) as e:
        wire.ack_id(PUBREC, b"\x00", 1)
    assert str(e.value) == "PUBREC remaining length must be 2, got 1 [§3.5.1]"
    assert rule(e.value) == "§3.5.1"
    with pytest.raises(CodecError) as e:
        wire.check_first_byte(0x64)  # PUBREL must carry flags 0x2
    assert str(e.value) == "PUBREL with flags 0x4, must be 0x2 [MQTT-3.6.1-1]"


def test_a_connect_field_too_long_is_named_with_the_rule_for_strings_or_binary_data():
    buf = bytearray(16)
    with pytest.raises(CodecError) as e:
        wire.pack_connect(buf, b"c" * 65536, True, 0)
    assert str(e.value) == "client identifier of 65536 bytes is longer than 65535 [§1.5.3]"
    with pytest.raises(CodecError) as e:
        wire.pack_connect(buf, b"c", True, 0, username=b"u", password=b"p" * 65536)
    assert str(e.value) == "password of 65536 bytes is longer than 65535 [§1.5.6]"


def test_a_client_error_names_the_packet_type_and_carries_no_rule_when_it_has_none():
    s = Session(b"dev")
    s.start(0)
    with pytest.raises(ProtocolError) as e:
        feed(s, b"\x90\x03\x00\x01\x00", 0)  # SUBACK before CONNACK
    assert str(e.value) == "expected CONNACK, got SUBACK"


PROGRAM = r"""
import gc, sys
from fleetwire import MQTTClient
from fleetwire.codec import wire
print("LOADED", "fleetwire.codec.reasons" in sys.modules or "fleetwire.reasons" in sys.modules)

def error():
    try:
        wire.check_first_byte(0x36)   # PUBLISH with QoS 3
    except ValueError as e:
        return e

e = error()
print("TEXT", e.args[0])

# Again with no room for the table: the key still names the error.
del sys.modules["fleetwire.codec.reasons"]
e = None
gc.collect()
hold = []
size = 8192
while size >= 256:
    try:
        hold.append(bytearray(size))
    except MemoryError:
        size //= 2
e = error()
hold = None
gc.collect()
print("TIGHT", type(e).__name__, e.args[0])
print("AFTER", error().args[0])
from fleetwire.session import Session
from fleetwire.feed import feed
s = Session(b"dev")
s.start(0)
try:
    feed(s, b"\xd0\x00", 0)   # PINGRESP before CONNACK
except Exception as x:
    print("CLIENT", type(x).__name__, x)
print("CLIENT_TABLE", "fleetwire.reasons" in sys.modules)
"""


@pytest.mark.micropython
def test_on_micropython_the_tables_load_only_for_an_error_and_a_full_heap_still_names_it(mpy, tmp_path):
    path = tmp_path / "reasons_prog.py"
    path.write_text(PROGRAM)
    r = mpy.run([str(path)], heap="96K")
    lines = dict(line.split(" ", 1) for line in r.stdout.splitlines() if " " in line)
    assert lines["LOADED"] == "False", r.stdout
    assert lines["TEXT"] == "PUBLISH with QoS 3 [MQTT-3.3.1-4]"
    assert lines["TIGHT"] == "CodecError %d" % line_number("qos3")  # its line in reasons.TEXT
    assert lines["AFTER"] == "PUBLISH with QoS 3 [MQTT-3.3.1-4]"
    assert lines["CLIENT"] == "ProtocolError expected CONNACK, got PINGRESP"
    assert lines["CLIENT_TABLE"] == "True"


def table5_line(key):
    lines = reasons5.TEXT.strip("\n").split("\n")
    keys = [line.split()[0] for line in lines]
    return keys.index(key) + 1, int(lines[keys.index(key)].split()[2], 16)


@pytest.mark.parametrize("name", ["wire5.py", "pack5.py"])
def test_the_mqtt5_modules_name_each_error_by_its_line_and_its_reason_code(name):
    src = source("shared", name)
    found = re.findall(r"^_([A-Z0-9_]+) = const\((\d+) \| (0x[0-9A-F]+) << 8\)", src, re.M)
    assert len(found) > 15
    for key, line, code in found:
        assert (int(line), int(code, 16)) == table5_line(key.lower()), key
    assert not re.findall(r'fail5\("', src)


def test_an_mqtt5_error_says_what_and_the_rule_and_carries_the_reason_code_for_disconnect():
    body = b"\x00\x01t\x03\x23\x00\x00"  # PUBLISH "t" with Topic Alias 0
    with pytest.raises(wire5.ProtocolError) as e:
        packets5.publish(0x30, body, len(body))
    assert str(e.value) == "Topic Alias 0 is not allowed [MQTT-3.3.2-8]"
    assert e.value.code == 0x94  # Topic Alias invalid
    assert isinstance(e.value, CodecError) and rule(e.value) == "MQTT-3.3.2-8"
    with pytest.raises(wire5.ProtocolError) as e:
        wire5.ack(PUBREC, b"\x00\x01\x05", 3)
    assert str(e.value) == "PUBREC with reason code 0x05, not one of its reason codes [MQTT-3.5.2-1]"
    assert e.value.code == 0x82  # Protocol Error


def test_a_311_primitive_reused_by_mqtt5_reports_the_mqtt5_rule():
    # wire.check_utf8 says MQTT-1.5.3-2 (3.1.1's id); through wire5 it is MQTT 5's 1.5.4-2
    with pytest.raises(wire5.ProtocolError) as e:
        wire5.utf8(b"a\x00", 0, 2)
    assert rule(e.value) == "MQTT-1.5.4-2" and e.value.code == 0x81

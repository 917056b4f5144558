"""The MQTT 5 codec answers every vector in host/portable/vectors/mqtt5.jsonl the same way on
CPython and on MicroPython (unix port, the .mpy board tree), as test_codec_vectors.py does for
3.1.1: bytes computed from the MQTT 5.0 standard, and for each malformed input the rule it
breaks and the reason code a client sends in DISCONNECT for it. run_vectors5.py checks one
vector on either interpreter and loads only the MQTT 5 modules."""

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from fleetwire.host.portable.vectors import RUNNER5, VECTOR_FILE5, parse_results, summary_line

# packets5, pack5, wire5 and reasons5 with the runner: more than the 64 KB the 3.1.1 small set
# runs in (the device client loads wire5 alone, see test_codec5_alloc.py)
HEAP = "96K"


def load_vectors(path=VECTOR_FILE5):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip() and not line.startswith("#")]


VECTORS = load_vectors()
NAMES = [v["name"] for v in VECTORS]
KINDS = ("packet", "decode_error", "encode_error", "client_decode_error", "client_encode_error", "stream")
PROPERTY_IDS = {
    "payload_format_indicator": 0x01,
    "message_expiry_interval": 0x02,
    "content_type": 0x03,
    "response_topic": 0x08,
    "correlation_data": 0x09,
    "subscription_identifier": 0x0B,
    "session_expiry_interval": 0x11,
    "assigned_client_identifier": 0x12,
    "server_keep_alive": 0x13,
    "authentication_method": 0x15,
    "authentication_data": 0x16,
    "request_problem_information": 0x17,
    "will_delay_interval": 0x18,
    "request_response_information": 0x19,
    "response_information": 0x1A,
    "server_reference": 0x1C,
    "reason_string": 0x1F,
    "receive_maximum": 0x21,
    "topic_alias_maximum": 0x22,
    "topic_alias": 0x23,
    "maximum_qos": 0x24,
    "retain_available": 0x25,
    "user_property": 0x26,
    "maximum_packet_size": 0x27,
    "wildcard_subscription_available": 0x28,
    "subscription_identifier_available": 0x29,
    "shared_subscription_available": 0x2A,
}
# Table 2-4: the packets each property may appear in (WILL: the will properties)
WHERE = {
    "CONNECT": {0x11, 0x15, 0x16, 0x17, 0x19, 0x21, 0x22, 0x26, 0x27},
    "WILL": {0x01, 0x02, 0x03, 0x08, 0x09, 0x18, 0x26},
    "CONNACK": {0x11, 0x12, 0x13, 0x15, 0x16, 0x1A, 0x1C, 0x1F, 0x21, 0x22, 0x24, 0x25, 0x26, 0x27}
    | {0x28, 0x29, 0x2A},
    "PUBLISH": {0x01, 0x02, 0x03, 0x08, 0x09, 0x0B, 0x23, 0x26},
    "PUBACK": {0x1F, 0x26},
    "PUBREC": {0x1F, 0x26},
    "PUBREL": {0x1F, 0x26},
    "PUBCOMP": {0x1F, 0x26},
    "SUBSCRIBE": {0x0B, 0x26},
    "SUBACK": {0x1F, 0x26},
    "UNSUBSCRIBE": {0x26},
    "UNSUBACK": {0x1F, 0x26},
    "DISCONNECT": {0x11, 0x1C, 0x1F, 0x26},
    "AUTH": {0x15, 0x16, 0x1F, 0x26},
}


def _load_runner():
    spec = importlib.util.spec_from_file_location("run_vectors5", RUNNER5)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


runner = _load_runner()


# ---- the vector file itself


def test_vector_names_are_unique_and_every_kind_is_used():
    assert len(VECTORS) >= 250
    assert len(set(NAMES)) == len(NAMES)
    assert {v["kind"] for v in VECTORS} == set(KINDS)


def test_every_packet_type_has_valid_and_malformed_vectors():
    valid = {v["packet"]["type"] for v in VECTORS if v["kind"] == "packet"}
    malformed = {runner.hexbytes(v["hex"])[0] >> 4 for v in VECTORS if v["kind"] == "decode_error"}
    assert valid == set(runner.CLASSES)
    assert malformed >= set(range(1, 16))


def test_every_property_appears_in_a_valid_vector_of_every_packet_that_may_carry_it():
    seen = {where: set() for where in WHERE}
    for v in VECTORS:
        if v["kind"] == "packet":
            p = v["packet"]
            for key, where in (("properties", p["type"]), ("will_properties", "WILL")):
                for name in p.get(key, {}):
                    seen[where].add(PROPERTY_IDS[name[:-4] if name.endswith("_hex") else name])
    assert seen == WHERE


def test_every_error_vector_names_a_rule_and_a_disconnect_reason_code():
    for v in VECTORS:
        if v["kind"].endswith("_error") or "error" in v:
            assert v["error"] and int(v["code"], 16) >= 0x80, v["name"]


# ---- CPython: in process, one test per vector


@pytest.mark.parametrize("v", VECTORS, ids=NAMES)
def test_vector_on_cpython(v):
    runner.check(v)


# ---- MicroPython: the runner once, one test per vector


@pytest.fixture(scope="session")
def mp5_vector_run(board_lib, tmp_path_factory):
    """({vector name: None or why it failed}, raw output) from MicroPython, the runner
    precompiled like the codec."""
    from fleetwire.host.rig import build, micropython

    rdir = str(tmp_path_factory.mktemp("vector-runner5"))
    subprocess.run(
        [
            build.mpy_cross_command(),
            "-o",
            os.path.join(rdir, "run_vectors5.mpy"),
            "-s",
            "run_vectors5.py",
            RUNNER5,
        ],
        check=True,
        capture_output=True,
    )
    r = micropython.run(
        ["-m", "run_vectors5", VECTOR_FILE5], lib=os.pathsep.join([board_lib, rdir]), heap=HEAP, timeout=300
    )
    return parse_results(r.stdout), r.stdout + r.stderr


@pytest.mark.micropython
@pytest.mark.parametrize("name", NAMES)
def test_vector_on_micropython(name, mp5_vector_run):
    results, out = mp5_vector_run
    assert name in results, "MicroPython did not report %s (%s):\n%s" % (name, summary_line(out), out[-2000:])
    assert results[name] is None, results[name]


@pytest.mark.micropython
def test_both_interpreters_ran_the_same_vectors(mp5_vector_run):
    r = subprocess.run([sys.executable, RUNNER5, VECTOR_FILE5], capture_output=True, text=True, timeout=300)
    assert set(parse_results(r.stdout)) == set(mp5_vector_run[0]) == set(NAMES)
    assert r.returncode == 0, r.stdout[-3000:]

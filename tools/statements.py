"""Which MQTT 3.1.1 client statements have a test: a test named for the statement
(test_MQTT_3_1_0_1_..., with _and_ for more than one) or a codec vector whose expected
error cites it (host/portable/vectors/codec.jsonl). Run from a checkout:

    fleetwire statements [--missing]

The statements are the normative ones of the OASIS standard (Appendix B) that bind a
client, as the MQTT 3.1.1 client checklist this project was given names them (it is not
in the repository; STATEMENTS below carries what is needed): 73 ids (the checklist
counts 72; one of those it names, 3.8.3-4, is checked by the server)."""

import os
import re
import sys

# id -> what a client must (not) do, in a few words
STATEMENTS = {
    "1.5.3-1": "strings are well-formed UTF-8; close on one that is not",
    "1.5.3-2": "no U+0000 in a string; close on one",
    "1.5.3-3": "a BOM is data, never stripped",
    "2.2.2-1": "reserved flag bits as Table 2.2",
    "2.2.2-2": "close on invalid flags received",
    "2.3.1-1": "non-zero packet id on SUBSCRIBE, UNSUBSCRIBE, PUBLISH QoS>0",
    "2.3.1-2": "a packet id not in use",
    "2.3.1-3": "the same id on a resend; free only after its ack",
    "2.3.1-5": "no packet id on QoS 0",
    "2.3.1-6": "PUBACK/PUBREC/PUBREL carry the PUBLISH's id",
    "3.1.0-1": "CONNECT first",
    "3.1.2-4": "clean session 0: keep the session after disconnect",
    "3.1.2-6": "clean session 1: discard the old session",
    "3.1.2-9": "will flag 1: will topic and message present",
    "3.1.2-11": "will flag 0: no will fields",
    "3.1.2-13": "will flag 0: will QoS 0",
    "3.1.2-14": "will QoS never 3",
    "3.1.2-15": "will flag 0: will retain 0",
    "3.1.2-18": "no user name flag: no user name",
    "3.1.2-19": "user name flag: a user name",
    "3.1.2-20": "no password flag: no password",
    "3.1.2-21": "password flag: a password",
    "3.1.2-22": "no password without a user name",
    "3.1.2-23": "PINGREQ when nothing was sent within keepalive",
    "3.1.3-1": "CONNECT payload fields in order",
    "3.1.3-2": "the client id identifies the session",
    "3.1.3-3": "the client id is present and first",
    "3.1.3-4": "the client id is UTF-8",
    "3.1.3-7": "an empty client id needs clean session 1",
    "3.1.3-10": "the will topic is UTF-8",
    "3.1.3-11": "the user name is UTF-8",
    "3.3.1-1": "DUP 1 on redelivery",
    "3.3.1-2": "DUP 0 on QoS 0",
    "3.3.1-4": "QoS bits never 11; close if received",
    "3.3.2-1": "the topic name first, UTF-8",
    "3.3.2-2": "no wildcards in a topic name",
    "3.3.4-1": "PUBACK for QoS 1, PUBREC for QoS 2",
    "3.6.1-1": "PUBREL flags 0010",
    "3.8.1-1": "SUBSCRIBE flags 0010",
    "3.8.3-1": "SUBSCRIBE filters are UTF-8",
    "3.8.3-3": "SUBSCRIBE has at least one filter",
    "3.8.3-4": "requested QoS reserved bits 0",
    "3.10.1-1": "UNSUBSCRIBE flags 0010",
    "3.10.3-1": "UNSUBSCRIBE filters are UTF-8",
    "3.10.3-2": "UNSUBSCRIBE has at least one filter",
    "3.14.4-1": "close the connection after DISCONNECT",
    "3.14.4-2": "nothing sent after DISCONNECT",
    "4.1.0-1": "keep the session state for the whole session",
    "4.1.0-2": "a session lasts at least as long as its connection",
    "4.3.1-1": "QoS 0: DUP 0",
    "4.3.2-1": "QoS 1 sender: new id, kept until PUBACK",
    "4.3.2-2": "QoS 1 receiver: PUBACK; then the id is new",
    "4.3.3-1": "QoS 2 sender: PUBREC, PUBREL, PUBCOMP; no PUBLISH after PUBREL",
    "4.3.3-2": "QoS 2 receiver: deliver once, on PUBREL",
    "4.4.0-1": "resend unacknowledged PUBLISH and PUBREL with their ids",
    "4.5.0-2": "acknowledge even a message the application ignores",
    "4.6.0-1": "resend in the original order",
    "4.6.0-2": "PUBACKs in the order of the PUBLISHes",
    "4.6.0-3": "PUBRECs in the order of the PUBLISHes",
    "4.6.0-4": "PUBRELs in the order of the PUBRECs",
    "4.7.1-1": "no wildcards in topic names",
    "4.7.1-2": "# alone or after /, and last",
    "4.7.1-3": "+ fills a whole level",
    "4.7.3-1": "topics at least one character",
    "4.7.3-2": "no U+0000 in topics",
    "4.7.3-3": "topics at most 65535 bytes",
    "4.8.0-1": "close on a protocol violation",
    "4.8.0-2": "close on a transient error with an inbound packet",
    "6.0.0-1": "WebSocket: binary frames only",
    "6.0.0-2": "WebSocket: packets not aligned to frames",
    "6.0.0-3": "WebSocket: offer the subprotocol mqtt",
    "7.0.0-2": "no required extensions",
    "7.1.2-1": "an ordered, lossless transport",
}

# Statements on what fleetwire does not offer, or has by construction
NOT_APPLICABLE = {
    "6.0.0-1": "no WebSocket transport",
    "6.0.0-2": "no WebSocket transport",
    "6.0.0-3": "no WebSocket transport",
    "7.0.0-2": "plain TCP needs nothing more (TLS is optional)",
    "7.1.2-1": "TCP, or TLS over TCP",
}

_NAME = re.compile(r"def (test_MQTT_\d+_\d+_\d+_\d+\w*)\(")
_FULL = re.compile(r"(\d+)_(\d+)_(\d+)_(\d+)")


def ids_in_name(name):
    """test_MQTT_3_1_2_13_and_15_x -> ["3.1.2-13", "3.1.2-15"]; an _and_ part is either
    a number in the same section or a full id (_and_4_1_0_1); words end the ids."""
    parts = name[len("test_MQTT_") :].split("_and_")
    m = _FULL.match(parts[0])
    section = "%s.%s.%s" % m.group(1, 2, 3)
    ids = [section + "-" + m.group(4)]
    for p in parts[1:]:
        m = _FULL.match(p)
        if m:
            section = "%s.%s.%s" % m.group(1, 2, 3)
            ids.append(section + "-" + m.group(4))
            continue
        m = re.match(r"\d+(?:_|$)", p)
        if not m:
            break  # "_and_" in the words that follow the ids
        ids.append(section + "-" + m.group(0).rstrip("_"))
    return ids


def coverage(repo):
    """-> {statement id: [test names and vector lines that prove it]}"""
    found = {}
    tests = os.path.join(repo, "tests")
    for root, _, files in os.walk(tests):
        for f in sorted(files):
            if not f.endswith(".py"):
                continue
            path = os.path.join(root, f)
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
            rel = os.path.relpath(path, repo)
            for name in _NAME.findall(text):
                for i in ids_in_name(name):
                    found.setdefault(i, []).append("%s::%s" % (rel, name))
    vectors = os.path.join(repo, "host", "portable", "vectors", "codec.jsonl")
    with open(vectors, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            for i in set(re.findall(r"MQTT-(\d+\.\d+\.\d+-\d+)", line)):
                found.setdefault(i, []).append("host/portable/vectors/codec.jsonl:%d" % n)
    return found


def summary(found):
    """coverage() -> (tested ids, not applicable ids, untested ids), each sorted."""

    def key(i):
        return [int(x) for x in re.split(r"[.-]", i)]

    ids = sorted(STATEMENTS, key=key)
    tested = [i for i in ids if i in found]
    na = [i for i in ids if i not in found and i in NOT_APPLICABLE]
    untested = [i for i in ids if i not in found and i not in NOT_APPLICABLE]
    return tested, na, untested


def add_arguments(p):
    p.add_argument(
        "--repo",
        default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
        help="the fleetwire checkout (default: the one this file is in)",
    )
    p.add_argument("--missing", action="store_true", help="list only the statements with no test")


def run(args):
    if not os.path.isfile(os.path.join(args.repo, "tests", "test_codec_vectors.py")):
        print(
            "statements: %s is not a fleetwire checkout (no tests/test_codec_vectors.py)" % args.repo,
            file=sys.stderr,
        )
        return 2
    found = coverage(args.repo)
    tested, na, untested = summary(found)
    if not args.missing:
        for i in tested:
            names = [p for p in found[i] if "::" in p]
            nvec = len(found[i]) - len(names)
            how = ", ".join(n.split("::")[1] for n in names[:2])
            if len(names) > 2:
                how += " (+%d)" % (len(names) - 2)
            if nvec:
                how += ("; " if how else "") + "%d vector%s" % (nvec, "s" if nvec > 1 else "")
            print("%-9s %-58s %s" % (i, STATEMENTS[i], how))
        for i in na:
            print("%-9s %-58s n/a: %s" % (i, STATEMENTS[i], NOT_APPLICABLE[i]))
    for i in untested:
        print("%-9s %-58s NO TEST" % (i, STATEMENTS[i]))
    print(
        "%d of the %d client statements have a test; %d do not apply to fleetwire; %d have none"
        % (len(tested), len(STATEMENTS), len(na), len(untested))
    )
    return 1 if untested else 0

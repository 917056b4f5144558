"""Which MQTT 3.1.1 and MQTT 5.0 client statements have a test: a test named for the
statement (test_MQTT_3_1_0_1_... for 3.1.1, test_MQTT5_3_3_2_8_... for 5.0, with _and_ for
more than one) or a codec vector that cites it (host/portable/vectors/codec.jsonl for 3.1.1,
mqtt5.jsonl for 5.0: its expected error or its name). Run from a checkout:

    fleetwire statements [--missing] [--mqtt 3.1.1|5]

The statements are the normative ones of the OASIS standard (Appendix B) that bind a
client, as the MQTT 3.1.1 client checklist this project was given names them (it is not
in the repository; STATEMENTS below carries what is needed): 73 ids (the checklist
counts 72; one of those it names, 3.8.3-4, is checked by the server). The MQTT 5.0 ones
(STATEMENTS5) are the 133 that bind a client in the OASIS MQTT 5.0 standard's Appendix B, as
the MQTT 5 client checklist splits them (45 the client's alone, 88 both sides'). A 5.0 id may
mean another rule than the same 3.1.1 id (3.1.2-11), so the two sets are counted apart."""

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

# The MQTT 5.0 statements that bind a client (mqtt5-client-checklist.md §2), id -> the rule
STATEMENTS5 = {
    "3.1.0-1": "CONNECT is the first packet on every new network connection",
    "3.1.2-1": "The protocol name is the string 'MQTT' (level byte 5)",
    "3.1.2-4": "Clean Start = 1: drop any existing session on both sides and start afresh",
    "3.1.2-16": "User Name flag 0: no User Name field",
    "3.1.2-17": "User Name flag 1: a User Name field follows",
    "3.1.2-18": "Password flag 0: no Password field",
    "3.1.2-19": "Password flag 1: a Password field follows (even without a user name)",
    "3.1.2-23": "Session Expiry Interval > 0: keep the session state after the connection closes",
    "3.1.3-1": "Payload order: ClientId, Will Properties, Will Topic, Will Payload, User Name, Password",
    "3.1.3-2": "The ClientId is the key of the session state each side keeps",
    "3.1.3-3": "The ClientId field is always present and comes first (it may be empty)",
    "3.1.3-4": "The ClientId is a UTF-8 string",
    "3.1.3-12": "The User Name is a UTF-8 string",
    "3.2.2-4": "No local session but Session Present = 1: close the connection",
    "3.2.2-5": "Local session but Session Present = 0: throw the local session away before going on",
    "3.2.2-11": "Never publish above the Maximum QoS the CONNACK announced",
    "3.2.2-14": "Retain Available = 0: never publish with RETAIN = 1",
    "4.1.0-1": "Never discard session state while the connection is open",
    "3.3.4-7": (
        "Never have more than the server's Receive Maximum QoS 1/2 PUBLISHes outstanding (no "
        "PUBACK, no PUBCOMP, no PUBREC ≥ 0x80 yet)"
    ),
    "3.3.4-8": (
        "A full window never holds back anything but QoS > 0 PUBLISH: acks, PUBREL, SUBSCRIBE, "
        "PINGREQ still go"
    ),
    "4.9.0-1": "Start each connection with a send quota > 0 and ≤ the peer's Receive Maximum",
    "4.9.0-2": "Each QoS > 0 PUBLISH takes one unit; at zero, send no more QoS > 0 PUBLISH (QoS 0 may go on)",
    "4.9.0-3": "At zero quota keep reading and answering every other packet",
    "3.2.2-15": (
        "Never send a packet (whole packet, header included) larger than the server's Maximum Packet Size"
    ),
    "3.4.2-2": (
        "Leave out the PUBACK's Reason String / User Property rather than exceed the receiver's maximum"
    ),
    "3.4.2-3": (
        "Leave out the PUBACK's Reason String / User Property rather than exceed the receiver's maximum"
    ),
    "3.5.2-2": "Same for PUBREC",
    "3.5.2-3": "Same for PUBREC",
    "3.6.2-2": "Same for PUBREL",
    "3.6.2-3": "Same for PUBREL",
    "3.7.2-2": "Same for PUBCOMP",
    "3.7.2-3": "Same for PUBCOMP",
    "3.14.2-3": "Same for DISCONNECT",
    "3.14.2-4": "Same for DISCONNECT",
    "3.15.2-2": "Same for AUTH",
    "3.15.2-3": "Same for AUTH",
    "3.2.2-17": "Never send an alias above the server's Topic Alias Maximum",
    "3.2.2-18": "Topic Alias Maximum absent or 0: send no aliases at all",
    "3.3.2-9": "(The same limit, stated again in the PUBLISH section.)",
    "3.3.2-7": "Alias mappings, inbound and outbound, die with the network connection; never carry one over",
    "3.3.2-8": "Never send Topic Alias 0",
    "3.3.2-10": "Accept every alias from 1 up to the Topic Alias Maximum the client sent",
    "4.3.3-7": "QoS 2 sender: once the PUBLISH has gone out, it no longer expires; finish the flow",
    "4.3.3-13": "QoS 2 receiver: complete PUBREC/PUBREL/PUBCOMP even for a message it expired",
    "3.3.2-13": "The Response Topic is a UTF-8 string",
    "3.3.2-14": "The Response Topic contains no wildcard",
    "3.3.2-19": "The Content Type is a UTF-8 string",
    "3.8.3-1": "SUBSCRIBE topic filters are UTF-8 strings",
    "3.8.3-2": "A SUBSCRIBE carries at least one filter/options pair",
    "3.10.3-1": "UNSUBSCRIBE topic filters are UTF-8 strings",
    "3.10.3-2": "An UNSUBSCRIBE carries at least one filter",
    "3.3.4-6": "A client's PUBLISH never contains a Subscription Identifier",
    "3.8.3-4": "No Local = 1 on a shared subscription is a Protocol Error",
    "4.8.2-1": "A shared filter starts `$share/` and has a ShareName of at least one character",
    "4.8.2-2": "The ShareName has no `/`, `+`, `#`; a `/` and an ordinary filter follow it",
    "3.1.2-9": "Will Flag 1: Will Properties, Will Topic and Will Payload are present",
    "3.1.2-11": "Will Flag 0: Will QoS is 0",
    "3.1.2-12": "Will QoS is 0, 1 or 2 (3 is a Malformed Packet)",
    "3.1.2-13": "Will Flag 0: Will Retain is 0",
    "3.1.3-11": "The Will Topic is a UTF-8 string",
    "3.4.2-1": "A PUBACK carries only a code from the PUBACK table",
    "3.5.2-1": "A PUBREC carries only a code from the PUBREC table",
    "3.6.2-1": "A PUBREL carries only 0x00 or 0x92",
    "3.7.2-1": "A PUBCOMP carries only 0x00 or 0x92",
    "3.14.2-1": (
        "A DISCONNECT carries only a code from the DISCONNECT table (and only those its sender may use)"
    ),
    "3.15.2-1": "An AUTH carries only 0x00, 0x18 or 0x19",
    "4.4.0-2": "A PUBACK/PUBREC ≥ 0x80 acknowledges the message: never re-send it",
    "3.14.4-1": "After sending DISCONNECT, send nothing more on that connection",
    "3.14.4-2": "After sending DISCONNECT, close the connection",
    "4.13.2-1": (
        "A CONNACK or DISCONNECT ≥ 0x80 means the connection closes, whether or not the packet got through"
    ),
    "3.1.2-30": (
        "With an Authentication Method in CONNECT, send only AUTH or DISCONNECT until CONNACK arrives"
    ),
    "4.12.0-3": "Answer a server AUTH with an AUTH carrying 0x18",
    "4.12.0-5": (
        "Every AUTH (and a successful CONNACK) carries the CONNECT's Authentication Method, unchanged"
    ),
    "4.12.0-7": "No Authentication Method in CONNECT: never send AUTH",
    "4.12.1-1": "Re-authentication (AUTH 0x19, after CONNACK) uses the original Authentication Method",
    "4.12.1-2": "A failed re-authentication ends with the connection closed (DISCONNECT first: SHOULD)",
    "3.14.1-1": "Check DISCONNECT's reserved flag bits are 0; if not, answer DISCONNECT 0x81",
    "3.15.1-1": "AUTH flag bits are 0000; anything else is malformed: close",
    "1.5.4-1": "Strings are well-formed UTF-8 with no U+D800–U+DFFF",
    "1.5.4-2": "No U+0000 in a string",
    "1.5.4-3": "Never strip or skip EF BB BF (U+FEFF)",
    "1.5.5-1": "Variable Byte Integers use the fewest bytes (lengths, property ids, Subscription Identifier)",
    "1.5.7-1": "Both strings of a User Property pair obey the string rules",
    "2.1.3-1": "Reserved fixed-header flag bits have exactly the listed values",
    "2.2.1-2": "No Packet Identifier in a QoS 0 PUBLISH",
    "2.2.1-3": "Each new SUBSCRIBE, UNSUBSCRIBE and QoS > 0 PUBLISH gets a non-zero, unused identifier",
    "2.2.1-5": "PUBACK, PUBREC, PUBREL, PUBCOMP echo the PUBLISH's identifier",
    "2.2.2-1": "No properties: write a Property Length of 0 (short ack forms excepted)",
    "3.3.1-4": "QoS bits are never `11`",
    "3.6.1-1": "PUBREL flags `0010`",
    "3.8.1-1": "SUBSCRIBE flags `0010`",
    "3.10.1-1": "UNSUBSCRIBE flags `0010`",
    "4.7.0-1": "Wildcards only in filters, never in a Topic Name",
    "4.7.1-1": "`#` alone or after `/`, and last",
    "4.7.1-2": "`+` fills a whole level",
    "4.7.3-1": (
        "Names and filters are at least one character (a zero-length PUBLISH topic is legal only "
        "with an alias, §1.4)"
    ),
    "4.7.3-2": "No U+0000 in names or filters",
    "4.7.3-3": "Names and filters encode to at most 65,535 bytes",
    "3.3.1-1": "DUP = 1 when re-delivering a PUBLISH",
    "3.3.1-2": "DUP = 0 on every QoS 0 PUBLISH",
    "3.3.2-1": "Topic Name is the first field and a UTF-8 string",
    "3.3.2-2": "No wildcards in a PUBLISH Topic Name",
    "3.3.4-1": "Answer a PUBLISH as its QoS requires: nothing, PUBACK, or PUBREC",
    "4.3.1-1": "QoS 0: one PUBLISH, QoS 0, DUP 0",
    "4.3.2-1": "QoS 1 sender: a fresh unused identifier per new message",
    "4.3.2-2": "QoS 1 sender: first PUBLISH has QoS 1, DUP 0",
    "4.3.2-3": "QoS 1 sender: unacknowledged until PUBACK",
    "4.3.2-4": "QoS 1 receiver: PUBACK with the same identifier once it owns the message",
    "4.3.2-5": "QoS 1 receiver: after PUBACK, the same identifier is a new message whatever DUP says",
    "4.3.3-1": "QoS 2 sender: a fresh unused identifier per new message",
    "4.3.3-2": "QoS 2 sender: first PUBLISH has QoS 2, DUP 0",
    "4.3.3-3": "QoS 2 sender: unacknowledged until PUBREC",
    "4.3.3-4": "QoS 2 sender: PUBREC < 0x80 → PUBREL with the same identifier (none after a failed PUBREC)",
    "4.3.3-5": "QoS 2 sender: PUBREL unacknowledged until PUBCOMP",
    "4.3.3-6": "QoS 2 sender: never re-send the PUBLISH once its PUBREL has gone",
    "4.3.3-8": "QoS 2 receiver: PUBREC with the same identifier once it owns the message",
    "4.3.3-9": "QoS 2 receiver: after sending PUBREC ≥ 0x80, the identifier is a new message next time",
    "4.3.3-10": "QoS 2 receiver: until PUBREL, answer repeats with PUBREC and deliver no duplicate",
    "4.3.3-11": "QoS 2 receiver: answer PUBREL with PUBCOMP, same identifier",
    "4.3.3-12": "QoS 2 receiver: after PUBCOMP the identifier is a new message",
    "4.4.0-1": (
        "Reconnect with Clean Start 0 and session present: re-send unacked PUBLISH and PUBREL with "
        "original identifiers; ✘ re-send at no other time"
    ),
    "4.5.0-2": "Acknowledge every PUBLISH by its QoS even if the application drops it",
    "4.6.0-1": "Re-send PUBLISHes in their original order",
    "4.6.0-2": "Send PUBACKs in the order the PUBLISHes arrived",
    "4.6.0-3": "Send PUBRECs in the order the PUBLISHes arrived",
    "4.6.0-4": "Send PUBRELs in the order the PUBRECs arrived",
    "3.1.2-20": "Keep Alive ≠ 0 and nothing else to send: send PINGREQ",
    "3.1.2-21": "A Server Keep Alive in CONNACK replaces the value the client sent",
    "3.2.2-21": "(The same rule, stated again in the CONNACK section.)",
    "4.2.0-1": "Run over an ordered, lossless byte stream (TCP, TLS, WebSocket)",
    "6.0.0-1": "WebSocket: binary frames only; close on any other data frame",
    "6.0.0-2": "WebSocket: do not assume packets align with frames",
    "6.0.0-3": "WebSocket: offer the subprotocol 'mqtt'",
}

NOT_APPLICABLE5 = {
    "4.2.0-1": "TCP, or TLS over TCP",
    "6.0.0-1": "no WebSocket transport",
    "6.0.0-2": "no WebSocket transport",
    "6.0.0-3": "no WebSocket transport",
}

_NAME = re.compile(r"def (test_MQTT_\d+_\d+_\d+_\d+\w*)\(")
_NAME5 = re.compile(r"def (test_MQTT5_\d+_\d+_\d+_\d+\w*)\(")
_FULL = re.compile(r"(\d+)_(\d+)_(\d+)_(\d+)")
# version -> (statements, not applicable, test name pattern, vector file)
VERSIONS = {
    "3.1.1": (STATEMENTS, NOT_APPLICABLE, _NAME, "codec.jsonl"),
    "5": (STATEMENTS5, NOT_APPLICABLE5, _NAME5, "mqtt5.jsonl"),
}


def ids_in_name(name):
    """test_MQTT_3_1_2_13_and_15_x -> ["3.1.2-13", "3.1.2-15"] (test_MQTT5_... alike); an
    _and_ part is either a number in the same section or a full id (_and_4_1_0_1); words end
    the ids."""
    parts = name[name.index("_", len("test_MQTT")) + 1 :].split("_and_")
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


def coverage(repo, version="3.1.1"):
    """-> {statement id: [test names and vector lines that prove it]} for MQTT `version`"""
    _, _, pattern, vector_file = VERSIONS[version]
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
            for name in pattern.findall(text):
                for i in ids_in_name(name):
                    found.setdefault(i, []).append("%s::%s" % (rel, name))
    vectors = os.path.join(repo, "host", "portable", "vectors", vector_file)
    with open(vectors, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if version != "3.1.1" and line.startswith("#"):
                continue  # 5.0: a vector, not a comment about one
            for i in set(re.findall(r"MQTT-(\d+\.\d+\.\d+-\d+)", line)):
                found.setdefault(i, []).append("host/portable/vectors/%s:%d" % (vector_file, n))
    return found


def summary(found, version="3.1.1"):
    """coverage() -> (tested ids, not applicable ids, untested ids), each sorted."""
    statements, not_applicable = VERSIONS[version][:2]

    def key(i):
        return [int(x) for x in re.split(r"[.-]", i)]

    ids = sorted(statements, key=key)
    tested = [i for i in ids if i in found]
    na = [i for i in ids if i not in found and i in not_applicable]
    untested = [i for i in ids if i not in found and i not in not_applicable]
    return tested, na, untested


def add_arguments(p):
    p.add_argument(
        "--repo",
        default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
        help="the fleetwire checkout (default: the one this file is in)",
    )
    p.add_argument("--missing", action="store_true", help="list only the statements with no test")
    p.add_argument(
        "--mqtt",
        choices=sorted(VERSIONS),
        help="one standard only (default: both, 3.1.1 first; the exit status is 3.1.1's, whose "
        "every client statement has a test, while MQTT 5 is being built)",
    )


def report(repo, version, missing):
    """Print one standard's table and count -> its untested ids."""
    statements, not_applicable = VERSIONS[version][:2]
    found = coverage(repo, version)
    tested, na, untested = summary(found, version)
    if not missing:
        for i in tested:
            names = [p for p in found[i] if "::" in p]
            nvec = len(found[i]) - len(names)
            how = ", ".join(n.split("::")[1] for n in names[:2])
            if len(names) > 2:
                how += " (+%d)" % (len(names) - 2)
            if nvec:
                how += ("; " if how else "") + "%d vector%s" % (nvec, "s" if nvec > 1 else "")
            print("%-9s %-58s %s" % (i, statements[i][:58], how))
        for i in na:
            print("%-9s %-58s n/a: %s" % (i, statements[i][:58], not_applicable[i]))
    for i in untested:
        print("%-9s %-58s NO TEST" % (i, statements[i][:58]))
    print(
        "%s%d of the %d client statements have a test; %d do not apply to fleetwire; %d have none"
        % ("" if version == "3.1.1" else "MQTT 5.0: ", len(tested), len(statements), len(na), len(untested))
    )
    return untested


def run(args):
    if not os.path.isfile(os.path.join(args.repo, "tests", "test_codec_vectors.py")):
        print(
            "statements: %s is not a fleetwire checkout (no tests/test_codec_vectors.py)" % args.repo,
            file=sys.stderr,
        )
        return 2
    status = 0
    for version in [args.mqtt] if args.mqtt else ["3.1.1", "5"]:
        if not args.mqtt:
            print("== MQTT %s" % ("3.1.1" if version == "3.1.1" else "5.0"))
        untested = report(args.repo, version, args.missing)
        if untested and (version == "3.1.1" or args.mqtt):
            status = 1
    return status

# MQTT 5's names and error texts: reason codes, properties, and the errors of the MQTT 5
# codec (wire5, packets5). Loaded only when an error is raised or a program asks for a
# name, as reasons.py is for MQTT 3.1.1: a board running MQTT 5 does not hold these texts.
from .reasons import NAMES as _NAMES
from .codes5 import REASONS, find, reason_name  # noqa: F401  (their home: codes5)

# Packet type names: 3.1.1's, type 15 is AUTH in MQTT 5, and "type" 0 stands for a CONNECT's
# will properties (the property checks take it as a packet type).
NAMES = ("will properties",) + _NAMES[1:15] + ("AUTH",)

# Properties (§2.2.2.2, Table 2-4): id, name. packets5 uses each name in lower case with
# "_" for " " as a key (topic_alias). wire5._PROPS holds their types and packets.
PROPERTIES = """
01 Payload Format Indicator
02 Message Expiry Interval
03 Content Type
08 Response Topic
09 Correlation Data
0b Subscription Identifier
11 Session Expiry Interval
12 Assigned Client Identifier
13 Server Keep Alive
15 Authentication Method
16 Authentication Data
17 Request Problem Information
18 Will Delay Interval
19 Request Response Information
1a Response Information
1c Server Reference
1f Reason String
21 Receive Maximum
22 Topic Alias Maximum
23 Topic Alias
24 Maximum QoS
25 Retain Available
26 User Property
27 Maximum Packet Size
28 Wildcard Subscription Available
29 Subscription Identifier Available
2a Shared Subscription Available
"""


def property_name(pid):
    """The name of property identifier pid (an int), as the standard writes it."""
    return find(PROPERTIES, pid) or "property 0x%02x" % pid


# 3.1.1 rules that MQTT 5 numbers differently: an error raised by a 3.1.1 primitive that the
# MQTT 5 codec reuses (wire.check_utf8, check_name, check_filter, check_first_byte) is
# reported with the 5.0 id (mqtt5-client-checklist §1.14); rules not listed keep their id.
RENUMBER = """
MQTT-1.5.3-1 MQTT-1.5.4-1
MQTT-1.5.3-2 MQTT-1.5.4-2
§1.5.3 §1.5.4
MQTT-2.2.2-2 MQTT-2.1.3-1
§2.2.1 §2.1.2
§2.2.3 §2.1.4
MQTT-2.3.1-1 MQTT-2.2.1-3
MQTT-4.7.1-1 MQTT-4.7.0-1
MQTT-4.7.1-2 MQTT-4.7.1-1
MQTT-4.7.1-3 MQTT-4.7.1-2
"""


def renumber(e):
    """The message of a 3.1.1 CodecError with its rule given its MQTT 5 id."""
    m = str(e)
    i = m.rfind(" [")
    if i < 0 or m[-1:] != "]":
        return m
    old = m[i + 2 : -1]
    k = RENUMBER.find("\n" + old + " ")
    if k < 0:
        return m
    k += len(old) + 2
    return m[: i + 2] + RENUMBER[k : RENUMBER.index("\n", k)] + "]"


# The MQTT 5 codec's errors, one a line: key, rule, the reason code a client sends in
# DISCONNECT for it (hex), message. "%T" takes a packet type and prints its name (NAMES),
# "%P" a property identifier and prints its name (PROPERTIES), "%R" a reason code and prints
# it with its name. wire5 names an error by its line number and code (_KEY = const(line |
# code << 8)), packets5 by its key: append new lines, never insert (tests/test_error_texts.py
# ties wire5's numbers to the lines).
TEXT = """
p_id       §2.2.2.2      81 property identifier 0x%02x is not an MQTT 5 property
p_where    §2.2.2.2      81 %P is not allowed in %T
p_twice    §2.2.2.2      82 %P appears more than once
p_cut      §2.2.2        81 %P runs past the end of the properties
p_len      §2.2.2.1      81 property length %d runs past the packet end (%d bytes left)
p_bool     §2.2.2.2      82 %P must be 0 or 1, got %d
p_zero     §2.2.2.2      82 %P must not be 0
p_alias0   MQTT-3.3.2-8  94 Topic Alias 0 is not allowed
p_subid0   §3.8.2.1.2    82 Subscription Identifier 0 is not allowed
p_subid_c  MQTT-3.3.4-6  82 a client's PUBLISH never carries a Subscription Identifier
p_sx_srv   MQTT-3.14.2-2 82 a server's DISCONNECT never carries a Session Expiry Interval
p_ad_nam   §3.1.2.11.10  82 Authentication Data without an Authentication Method
p_rtopic   MQTT-3.3.2-14 82 Response Topic is empty or holds a wildcard
p_pair     MQTT-1.5.7-1  81 a User Property's %s is not a valid MQTT string
p_range    §2.2.2.2      82 %P: %r does not fit its type
vbi_long   §1.5.5        81 Variable Byte Integer longer than 4 bytes
vbi_min    MQTT-1.5.5-1  81 Variable Byte Integer %d not in its shortest form
vbi_cut    §1.5.5        81 Variable Byte Integer cut short at the packet end
rc_bad     -             82 %T with reason code 0x%02x, not one of its reason codes
rc_srv     -             82 %T with reason code %R, which only a server sends
rc_cli     -             82 %T with reason code %R, which only a client sends
short      -             81 %T of %d bytes is too short
trailing   §2.1.4        81 %T has %d bytes after its last field
pid0       MQTT-2.2.1-3  82 %T with packet identifier 0
ack_flags  §3.2.2.1.1    81 CONNACK acknowledge flags 0x%02x: bits 7-1 are reserved
ack_sp     MQTT-3.2.2-6  82 CONNACK refusal 0x%02x with Session Present set
cut        -             81 %T: %s runs past the packet end
no_topic   §3.3.2.3.4    82 PUBLISH with an empty topic name and no Topic Alias
no_codes   -             82 %T needs at least one reason code
auth_meth  §3.15.2.2.2   82 AUTH %R without an Authentication Method
pub_wild   MQTT-3.3.2-2  90 wildcard in a received topic name
v311       §3.2.2.2      84 a 3.1.1 CONNACK (return code %d): the server does not speak MQTT 5
no_fit     -             95 %T of %d bytes does not fit a %d-byte buffer
flags      MQTT-3.15.1-1 81 AUTH with flags 0x%x, must be 0x0
keepalive  §3.1.2.10     82 keepalive must be 0..65535 seconds, got %r
will_part  MQTT-3.1.2-9  82 will properties, payload, QoS or retain given without a will topic
will_qos3  MQTT-3.1.2-12 81 will QoS must be 0, 1 or 2, got %r
field_long §1.5          82 %s of %d bytes is longer than 65535
sub_none   MQTT-3.8.3-2  82 SUBSCRIBE needs at least one topic filter
unsub_none MQTT-3.10.3-2 82 UNSUBSCRIBE needs at least one topic filter
sub_opts   MQTT-3.8.3-5  81 subscription options 0x%02x: bits 7-6 are reserved
sub_qos    §3.8.3.1      82 subscription options 0x%02x: QoS 3
sub_rh     §3.8.3.1      82 subscription options 0x%02x: Retain Handling 3
share_nl   MQTT-3.8.3-4  82 No Local on a shared subscription
share_nm1  MQTT-4.8.2-1  8f a shared subscription needs a ShareName of at least one character
share_nm2  MQTT-4.8.2-2  8f a ShareName holds no '/', '+' or '#' and a topic filter follows it
pid_range  MQTT-2.2.1-3  82 %T needs a packet identifier in 1..65535, got %r
qos        MQTT-3.3.1-4  81 QoS must be 0, 1 or 2, got %r
pub_pid0   MQTT-2.2.1-2  82 a QoS 0 PUBLISH carries no packet identifier
pub_dup0   MQTT-3.3.1-2  81 DUP set on a QoS 0 PUBLISH
connect_nm MQTT-3.1.2-1  81 protocol name %r is not MQTT
connect_lv §3.1.2.2      84 protocol level %d is not 5 (MQTT 5.0)
connect_rs MQTT-3.1.2-3  81 CONNECT reserved flag bit 0 is set
will_qos   MQTT-3.1.2-11 81 will QoS %d set without the will flag
will_ret   MQTT-3.1.2-13 81 will retain set without the will flag
pw_cut     MQTT-3.1.2-19 81 password flag set and no password follows
user_cut   MQTT-3.1.2-17 81 user name flag set and no user name follows
over_max   §2.1.4        95 packet of %d bytes is over max_packet (%d)
ends       §2.1.4        81 input ends inside a %T's %s
"""


# The rule a reason code outside its packet's table breaks, by packet type.
RC_RULES = (
    "",
    "",
    "§3.2.2.2",
    "",
    "MQTT-3.4.2-1",
    "MQTT-3.5.2-1",
    "MQTT-3.6.2-1",
    "MQTT-3.7.2-1",
    "",
    "§3.9.3",
    "",
    "§3.11.3",
    "",
    "",
    "MQTT-3.14.2-1",
    "MQTT-3.15.2-1",
)


def text(key, values):
    """(the message for an error key, a line's name or number, with its values and " [rule]",
    the reason code a client sends in DISCONNECT for it)."""
    table = TEXT
    if not isinstance(key, str):  # line number key
        i = 0
        for _ in range(key):
            i = table.index("\n", i) + 1
        key = table[i : table.index(" ", i)]
    i = table.index("\n" + key + " ") + len(key) + 1
    rule, code, msg = table[i : table.index("\n", i)].split(None, 2)
    values = list(values)
    t = 0
    n = 0  # the placeholders in order: %T, %P and %R name their value
    i = msg.find("%")
    while i >= 0:
        c = msg[i + 1]
        if c == "T":
            t = values[n] & 15  # (wire5 adds the sender's bits to a type)
            values[n] = NAMES[t]
        elif c == "P":
            values[n] = property_name(values[n])
        elif c == "R":
            values[n] = "0x%02x %s" % (values[n], reason_name(values[n], t))
        n += 1
        i = msg.find("%", i + 2)
    if rule == "-":
        rule = RC_RULES[t] if key[:3] == "rc_" else "§3.%d" % t
    msg = msg.replace("%T", "%s").replace("%P", "%s").replace("%R", "%s") % tuple(values[:n])
    return msg + " [" + rule + "]", int(code, 16)

# MQTT 5's reason codes by name, alone: what a board loads to word a refusal (ConnectRefused,
# SubscribeRefused, a broker's DISCONNECT) without the codec's error texts (reasons5.py,
# which takes these from here).

# Reason codes (§2.4, Table 2-6), one a line: code, name. 0x00..0x02 have names that depend on
# the packet (reason_name() picks them).
REASONS = """
00 Success
01 Granted QoS 1
02 Granted QoS 2
04 Disconnect with Will Message
10 No matching subscribers
11 No subscription existed
18 Continue authentication
19 Re-authenticate
80 Unspecified error
81 Malformed Packet
82 Protocol Error
83 Implementation specific error
84 Unsupported Protocol Version
85 Client Identifier not valid
86 Bad User Name or Password
87 Not authorized
88 Server unavailable
89 Server busy
8a Banned
8b Server shutting down
8c Bad authentication method
8d Keep Alive timeout
8e Session taken over
8f Topic Filter invalid
90 Topic Name invalid
91 Packet Identifier in use
92 Packet Identifier not found
93 Receive Maximum exceeded
94 Topic Alias invalid
95 Packet too large
96 Message rate too high
97 Quota exceeded
98 Administrative action
99 Payload format invalid
9a Retain not supported
9b QoS not supported
9c Use another server
9d Server moved
9e Shared Subscriptions not supported
9f Connection rate exceeded
a0 Maximum connect time
a1 Subscription Identifiers not supported
a2 Wildcard Subscriptions not supported
"""


def find(table, code):
    # the name on the line of a two-hex-digit code, or None
    i = table.find("\n%02x " % code)
    return None if i < 0 else table[i + 4 : table.index("\n", i + 1)]


def reason_name(code, t=0):
    """The name of reason code `code` (an int) in a packet of type t: 0x00 is "Normal
    disconnection" in DISCONNECT and "Granted QoS 0" in SUBACK, "Success" elsewhere."""
    if code == 0:
        return "Normal disconnection" if t == 14 else "Granted QoS 0" if t == 9 else "Success"
    return find(REASONS, code) or "reason code 0x%02x" % code

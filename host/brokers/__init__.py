"""The broker matrix: real MQTT brokers from the registries this project installs from,
each started on 127.0.0.1 and a free port with one common interface (base.Broker), so
the end-to-end tests run against every one of them.

    from fleetwire.host.brokers import make
    with make("aedes") as b:            # mosquitto, aedes, amqtt, rabbitmq
        print(b.name, b.version, b.host, b.port, b.quirk("overlap"))

FEATURES names what the tests check, with what MQTT 3.1.1 says; each broker class
lists, under the same keys, what it does instead (its quirks). `python -m
fleetwire.host.brokers` prints the compatibility table from them; a test
keeps its copy in docs/reference/brokers.md equal to it, and the scenario tests assert each quirk (or the
standard where there is none), so a broker that changes either way is noticed.

FLEETWIRE_BROKERS=mosquitto,aedes limits the matrix the tests run (default: all)."""

import os

from .base import Broker, BrokerError, BrokerMissing  # noqa: F401

NAMES = ("mosquitto", "aedes", "amqtt", "rabbitmq")

# key -> (feature, what MQTT 3.1.1 says), in the table's order
FEATURES = {
    "session": (
        "clean and persistent sessions",
        "clean session 1 discards the session, 0 keeps it; CONNACK says if one was kept "
        "(MQTT-3.1.2-6, 3.2.2-2)",
    ),
    "zero_id": ("zero-length client id", "accepted with clean session 1 (MQTT-3.1.3-6)"),
    "qos_out": ("publish at QoS 0, 1, 2", "each message arrives once at its QoS; QoS 2 exactly once"),
    "qos_in": (
        "subscribe at QoS 0, 1, 2",
        "the QoS asked is granted or less; a message arrives at the lower of its QoS and the "
        "granted one (MQTT-3.8.4-6)",
    ),
    "retained": (
        "retained messages",
        "kept, and sent with RETAIN 1 to each new matching subscription, wildcards included; an "
        "empty one clears it (MQTT-3.3.1-6, 3.3.1-10)",
    ),
    "retained_qos2": ("retained message at QoS 2", "arrives once, at QoS 2, with RETAIN 1"),
    "will": ("last will", "published when the client dies, not after DISCONNECT (MQTT-3.1.2-8, 3.1.2-10)"),
    "keepalive": (
        "keepalive, ping",
        "PINGRESP to PINGREQ; a silent client is dropped after 1.5 x keepalive and its will "
        "published (MQTT-3.1.2-24)",
    ),
    "unsubscribe": ("unsubscribe", "nothing more arrives for the filter (MQTT-3.10.4-1)"),
    "overlap": (
        "overlapping subscriptions",
        "a message matching several subscriptions arrives at the highest of their QoS; extra "
        "copies allowed (MQTT-3.3.5-1)",
    ),
    "sub_refused": ("refused subscription (ACL)", "SUBACK 0x80 for that filter; the connection stays up"),
    "dollar": (
        "$ topics",
        "a filter starting with a wildcard matches no topic starting with $ (MQTT-4.7.2-1)",
    ),
    "offline": (
        "offline queueing",
        "QoS 1 and 2 messages for an absent persistent session are kept and sent when it returns",
    ),
    "redelivery": (
        "redelivery on reconnect",
        "unacknowledged PUBLISHes are sent again after a reconnect to the session (MQTT-4.4.0-1)",
    ),
    "backlog": (
        "backlog of 40 messages after a reconnect",
        "all are sent; MQTT 3.1.1 sets no limit on messages in flight to a client",
    ),
}
TITLES = {"mosquitto": "mosquitto", "aedes": "aedes", "amqtt": "amqtt", "rabbitmq": "RabbitMQ"}


def classes():
    from .aedes import Aedes
    from .amqtt import Amqtt
    from .mosquitto import MatrixMosquitto as Mosquitto
    from .rabbitmq import RabbitMQ

    return {"mosquitto": Mosquitto, "aedes": Aedes, "amqtt": Amqtt, "rabbitmq": RabbitMQ}


def make(name, **kw):
    """A new (not yet started) broker of the matrix by name."""
    try:
        cls = classes()[name]
    except KeyError:
        raise ValueError("no broker %r in the matrix (it has: %s)" % (name, ", ".join(NAMES))) from None
    return cls(**kw)


def matrix(env=None):
    """The broker names the tests run against: FLEETWIRE_BROKERS (comma-separated) or all."""
    env = os.environ if env is None else env
    wanted = [n.strip() for n in env.get("FLEETWIRE_BROKERS", "").split(",") if n.strip()]
    unknown = [n for n in wanted if n not in NAMES]
    if unknown:
        raise ValueError(
            "FLEETWIRE_BROKERS names %s; the matrix has %s" % (", ".join(unknown), ", ".join(NAMES))
        )
    return tuple(wanted) or NAMES


def versions():
    """{name: installed version} for every broker of the matrix (none is started)."""
    out = {}
    for name in NAMES:
        b = make(name)
        try:
            out[name] = b.version
        finally:
            b.close()
    return out


def table(versions):
    """The compatibility table (markdown, docs/reference/brokers.md): a row per feature, a column per broker;
    a cell is "yes" where the broker does what the standard says, else its quirk's label."""
    cls = classes()
    head = ["feature"] + ["%s %s" % (TITLES[n], versions[n]) for n in NAMES]
    rows = [head, ["---"] * len(head)]
    for key, (feature, _) in FEATURES.items():
        rows.append([feature] + [cls[n].quirks[key].label if key in cls[n].quirks else "yes" for n in NAMES])
    return "\n".join("| " + " | ".join(r) + " |" for r in rows) + "\n"


def quirk_notes():
    """The sentence for each quirk (docs/reference/brokers.md): what the broker does, what the standard says,
    and what fleetwire does about it."""
    cls = classes()
    lines = []
    for n in NAMES:
        for key in FEATURES:
            q = cls[n].quirks.get(key)
            if q:
                lines.append(
                    "- **%s, %s**: %s. fleetwire: %s." % (TITLES[n], FEATURES[key][0], q.does, q.fleetwire)
                )
    return "\n".join(lines) + "\n"


def main():
    """python -m fleetwire.host.brokers: print the compatibility table and quirk notes."""
    print(table(versions()))
    print(quirk_notes(), end="")

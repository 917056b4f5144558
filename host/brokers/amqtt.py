"""amqtt (PyPI) in the broker matrix: its own `amqtt` broker script in a process of
its own (this interpreter), $SYS every second, and amqtt_plugin.DenyPrefix refusing
subscriptions under DENIED_PREFIX. Clients must give a user name (any password): with
anonymous clients allowed, amqtt marks every session anonymous and keeps nothing for a
persistent one while it is away (broker.py, "no expectation that messages should be
retained"), so the matrix runs it as a fleet would, with logins."""

import os
import sys

from .base import Broker, BrokerMissing, Quirk


class Amqtt(Broker):
    name = "amqtt"
    quirks = {
        "session": Quirk(
            "always_present",
            "present 1 always",
            "answers session present 1 to every clean-session-0 connect, also when it has no session for "
            "the client id (a new id, or after its own restart: it keeps sessions in memory); MQTT-3.2.2-3 "
            "says 0",
            "the client believes it and does not resubscribe, so after an amqtt restart a device's "
            "subscriptions are gone: on amqtt, subscribe again after every connect",
        ),
        "qos_out": Quirk(
            "lost_on_disconnect",
            "loses messages acknowledged just before a disconnect",
            "may lose messages it has acknowledged when their publisher disconnects at once (of 20 clients "
            "that each sent QoS 0, retained QoS 0 and QoS 1 and then DISCONNECT, 21 to 25 of 60 messages "
            "arrived; all of them with 0.3 s before DISCONNECT); with PUBACK the server owns the message "
            "(MQTT-4.3.2)",
            "nothing the client can do: after PUBACK the message is the broker's",
        ),
        "qos_in": Quirk(
            "granted_qos",
            "delivers at the granted QoS",
            "delivers every message at the subscription's granted QoS, raising QoS 0 and 1 messages to a "
            "QoS 2 subscription to QoS 2; MQTT-3.8.4-6 says the lower of the two",
            "the client takes a message at any QoS and acknowledges it as its QoS requires",
        ),
        "retained": Quirk(
            "pushed_on_connect",
            "pushes retained messages on connect",
            "sends a client, as soon as it connects, the retained messages matching any filter any client "
            "ever subscribed to, at QoS 0, before it subscribes to anything, and again on its own "
            "subscription; MQTT-3.3.1-6 says only on a new subscription of its own",
            "the client hands them to the callback like any message, with `c.retained` set",
        ),
        "offline": Quirk(
            "retain_set",
            "sets RETAIN on queued messages",
            "delivers the messages it kept for a persistent session while the client was away with "
            "the RETAIN flag set; MQTT-3.3.1-9 says 0 for a message sent because of an established "
            "subscription",
            "the client hands them on as the broker sent them, with `c.retained` set",
        ),
        "redelivery": Quirk(
            "lost",
            "loses unacknowledged messages",
            "loses the QoS 1 and 2 messages it had sent and not seen acknowledged when the connection "
            "drops: nothing is sent again after the reconnect; MQTT-4.4.0-1 says send them again",
            "nothing the client can do: on amqtt, QoS 1 and 2 to a device are at most once across a "
            "lost connection",
        ),
        "keepalive": Quirk(
            "never_drops",
            "never drops a silent client",
            "never drops a silent client (it ignores its own read timeout), so the will of a device that "
            "hangs is never published; MQTT-3.1.2-24 says after 1.5 x keepalive",
            "the device still finds a dead link itself; a hung device's will never comes",
        ),
    }

    def __init__(self, **kw):
        try:
            from importlib.metadata import version, PackageNotFoundError

            self._version = version("amqtt")
        except PackageNotFoundError:
            raise BrokerMissing(
                "amqtt is not installed in %s: pip install -e '.[dev]' "
                "(bash tools/run.sh setup does it)" % sys.prefix
            ) from None
        super().__init__(**kw)

    @property
    def version(self):
        return self._version

    def _write_config(self):
        # YAML is a superset of JSON: no YAML writer needed.
        import json

        config = {
            "listeners": {"default": {"type": "tcp", "bind": "%s:%d" % (self.host, self.port)}},
            "plugins": {
                "amqtt.plugins.logging_amqtt.EventLoggerPlugin": {},
                "amqtt.plugins.authentication.AnonymousAuthPlugin": {"allow_anonymous": False},
                "amqtt.plugins.sys.broker.BrokerSysPlugin": {"sys_interval": 1},
                "fleetwire.host.brokers.amqtt_plugin.DenyPrefix": {"prefix": self.DENIED_PREFIX},
            },
        }
        with open(os.path.join(self.dir, "amqtt.yaml"), "w") as f:
            json.dump(config, f, indent=1)

    def _command(self):
        return [
            sys.executable,
            "-c",
            "from amqtt.scripts.broker_script import main; main()",
            "-c",
            os.path.join(self.dir, "amqtt.yaml"),
        ]

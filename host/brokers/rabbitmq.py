"""RabbitMQ (Debian's rabbitmq-server) with its MQTT plugin in the broker matrix.

Only MQTT listens (AMQP is off), on 127.0.0.1; its Erlang distribution port and its own
epmd (port mapper) also listen on 127.0.0.1 only, on free ports, so it neither meets
another RabbitMQ on this machine nor opens anything outside. Everything it writes
(node database, logs, Erlang cookie) is in its temp dir. Clients log in as USER
(anonymous ones are taken for it), defined in a definitions file whose topic permissions
refuse reading under DENIED_PREFIX, so such a subscription is refused. It takes several seconds to
start: use one per test session."""

import base64
import glob
import hashlib
import json
import os

from .base import Broker, BrokerMissing, Quirk, free_port

RABBIT_HOME = "/usr/lib/rabbitmq"


def password_hash(password, salt=None):
    """A definitions-file password hash (rabbit_password_hashing_sha256)."""
    salt = os.urandom(4) if salt is None else salt
    return base64.b64encode(salt + hashlib.sha256(salt + password.encode()).digest()).decode()


def server_dir():
    found = sorted(glob.glob(os.path.join(RABBIT_HOME, "lib", "rabbitmq_server-*")))
    if not found or not os.path.isfile(os.path.join(RABBIT_HOME, "bin", "rabbitmq-server")):
        raise BrokerMissing(
            "rabbitmq-server is not installed (looked in %s): apt-get install -y "
            "rabbitmq-server (bash tools/run.sh setup does it)" % RABBIT_HOME
        )
    return found[-1]


class RabbitMQ(Broker):
    name = "rabbitmq"
    quirks = {
        "session": Quirk(
            "present_needs_subscriptions",
            "present 0 without subscriptions",
            "answers session present 0 to a persistent session that has no subscriptions (its session is a "
            "queue, made on the first SUBSCRIBE); MQTT-3.2.2-2 says 1",
            "the client resubscribes when session present is 0, which costs nothing here",
        ),
        "qos_out": Quirk(
            "qos2_puback",
            "QoS 2 publish: PUBACK, forwarded at QoS 1",
            "answers a QoS 2 PUBLISH with PUBACK, as for QoS 1, and forwards it at QoS 1; MQTT-4.3.3 says "
            "PUBREC, and exactly once",
            "the client takes that PUBACK as the end of the flow (the broker has the message at least "
            "once and would never answer a PUBREL); for exactly once, RabbitMQ 3.10 has no QoS 2",
        ),
        "qos_in": Quirk(
            "max_qos1",
            "grants QoS 1 for 2",
            "grants QoS 1 to a QoS 2 subscription, so QoS 2 messages arrive at QoS 1 (allowed: a server may "
            "grant less than asked, MQTT-3.9.3)",
            "subscribe() returns the granted 1; messages arrive at least once",
        ),
        "retained": Quirk(
            "exact_only",
            "retained only to exact-topic subscriptions",
            "sends a retained message only to a subscription to its exact topic, never to a wildcard "
            "filter; MQTT-3.3.1-6 says every matching new subscription",
            "subscribe to the exact topic where the retained message matters",
        ),
        "keepalive": Quirk(
            "late_drop",
            "drops a silent client late (2 x keepalive + 1 s)",
            "drops a silent client after about 2 x keepalive + 1 s (3 s for 1 s, 5 s for 2 s); "
            "MQTT-3.1.2-24 says after 1.5 x keepalive",
            "the device finds a dead link itself within keepalive + 100 ms; only the will comes later",
        ),
        "sub_refused": Quirk(
            "closes",
            "closes the connection",
            "closes the connection instead of answering SUBACK 0x80 (access_refused in its log); the "
            "standard's answer is the return code 0x80 for that filter (MQTT-3.9.3)",
            "subscribe() raises the lost connection (OSError) and forgets the filter, so the next "
            "connect() does not ask for it again",
        ),
        "dollar": Quirk(
            "no_sys",
            "no $SYS",
            "publishes no $SYS topics (allowed: $SYS is not part of MQTT 3.1.1)",
            "nothing to do",
        ),
    }
    start_timeout = 90

    def __init__(self, **kw):
        self.home = server_dir()
        super().__init__(**kw)
        self.epmd_port = free_port()
        self.dist_port = free_port()

    @property
    def version(self):
        return os.path.basename(self.home).split("-", 1)[1]

    def _write_config(self):
        d = self.dir
        denied = self.DENIED_PREFIX.replace("/", ".")  # MQTT topic levels are AMQP routing-key words
        with open(os.path.join(d, "definitions.json"), "w") as f:
            json.dump(
                {
                    "users": [
                        {
                            "name": self.USER,
                            "password_hash": password_hash(self.PASSWORD),
                            "hashing_algorithm": "rabbit_password_hashing_sha256",
                            "tags": [],
                        }
                    ],
                    "vhosts": [{"name": "/"}],
                    "permissions": [
                        {"user": self.USER, "vhost": "/", "configure": ".*", "write": ".*", "read": ".*"}
                    ],
                    "topic_permissions": [
                        {
                            "user": self.USER,
                            "vhost": "/",
                            "exchange": "amq.topic",
                            "write": ".*",
                            "read": "^(?!%s)" % denied.replace(".", "\\."),
                        }
                    ],
                },
                f,
            )
        conf = [
            "listeners.tcp = none",
            "mqtt.listeners.tcp.default = %s:%d" % (self.host, self.port),
            "mqtt.allow_anonymous = true",
            "mqtt.default_user = " + self.USER,  # who an anonymous client is
            "mqtt.default_pass = " + self.PASSWORD,
            "mqtt.vhost = /",
            "mqtt.exchange = amq.topic",
            "load_definitions = " + os.path.join(d, "definitions.json"),
            "log.console = true",
            "log.console.level = info",
            "log.console.formatter = plaintext",
            "log.file = false",
        ]
        with open(os.path.join(d, "rabbitmq.conf"), "w") as f:
            f.write("\n".join(conf) + "\n")
        with open(os.path.join(d, "enabled_plugins"), "w") as f:
            f.write("[rabbitmq_mqtt].\n")
        open(os.path.join(d, "rabbitmq-env.conf"), "w").close()  # not /etc/rabbitmq's

    def _env(self):
        d = self.dir
        env = dict(os.environ)
        env.update(
            {
                "HOME": d,  # the Erlang cookie goes here
                "ERL_EPMD_PORT": str(self.epmd_port),
                "ERL_EPMD_ADDRESS": self.host,
                "RABBITMQ_NODENAME": "fleetwire-%d@localhost" % self.port,
                "RABBITMQ_CONF_ENV_FILE": os.path.join(d, "rabbitmq-env.conf"),
                "RABBITMQ_CONFIG_FILE": os.path.join(d, "rabbitmq.conf"),
                "RABBITMQ_ENABLED_PLUGINS_FILE": os.path.join(d, "enabled_plugins"),
                "RABBITMQ_MNESIA_BASE": os.path.join(d, "mnesia"),
                "RABBITMQ_LOG_BASE": os.path.join(d, "log"),
                "RABBITMQ_PLUGINS_EXPAND_DIR": os.path.join(d, "plugins-expand"),
                "RABBITMQ_PID_FILE": os.path.join(d, "rabbitmq.pid"),
                "RABBITMQ_DIST_PORT": str(self.dist_port),
                "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": "-kernel inet_dist_use_interface {127,0,0,1}",
            }
        )
        return env

    def _command(self):
        # epmd first, in this process group (one that Erlang started would detach and
        # outlive the broker); RabbitMQ once it answers.
        script = (
            'epmd -port "$ERL_EPMD_PORT" -address 127.0.0.1 & '
            'for i in $(seq 100); do epmd -port "$ERL_EPMD_PORT" -names >/dev/null 2>&1 && break; '
            "sleep 0.05; done; exec %s/bin/rabbitmq-server" % RABBIT_HOME
        )
        return ["sh", "-c", script]

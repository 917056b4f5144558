"""Shared by the identity tests: a board's credentials written as `fleetwire deploy` writes
them (DER files), and a config.json naming them."""

import json
import os

import pytest

from fleetwire.host.identity import pki


class BoardFiles:
    """A board's identity files in a directory of the test's, for a MicroPython program."""

    def __init__(self, root, broker):
        self.root = str(root)
        self.broker = broker
        os.makedirs(self.root, exist_ok=True)
        self.ca_der = os.path.join(self.root, "ca.der")
        with open(self.ca_der, "wb") as f:
            with open(broker.ca_der, "rb") as g:
                f.write(g.read())

    def write(self, name, issued):
        """The certificate and key of a pki.Issued as name.der and name.key.der."""
        cert = os.path.join(self.root, name + ".der")
        key = os.path.join(self.root, name + ".key.der")
        with open(cert, "wb") as f:
            f.write(pki.der(issued.cert))
        pki.write_private(key, pki.key_der(issued.key))
        return cert, key

    def config(self, name, device_id, cert=None, key=None, **kw):
        """config.json (at ROOT/name.json) -> its path."""
        cfg = {
            "device_id": device_id,
            "broker": "localhost",
            "port": self.broker.port,
            "tls_ca": self.ca_der,
            "store": os.path.join(self.root, "store-" + device_id),
        }
        if cert:
            cfg.update(tls_cert=cert, tls_key=key)
        cfg.update(kw)
        path = os.path.join(self.root, name + ".json")
        with open(path, "w") as f:
            json.dump(cfg, f)
        return path


@pytest.fixture
def board_files(tmp_path, identity_mosquitto):
    return BoardFiles(tmp_path / "board", identity_mosquitto)

"""What the over-the-air update tests share: a board deployed with updates on (a virtual
board unless --board) and the fleet's release-signing keys, the update service logged in as
the operator on the board's broker and signing with those keys, and releases built as
`fleetwire bundle` builds them."""

import itertools
import os

import pytest

from fleetwire.host.testing.hil import board, device_config, wait
from fleetwire.host.rollout.release import Release, bundle

_ids = itertools.count(1)

# An app for a release: it says which release it is once connected, so the console shows it
APP = """
VERSION = %r
def setup(client):
    print("app: release", VERSION, "running")
"""


def app_release(version, app=None, chunk=1024, board="esp32", **extra):
    """An app bundle of the board tree (.mpy) and an app.py that names `version`."""
    files = {"app.py": (app if app is not None else APP % version).encode()}
    files.update(extra)
    return Release.from_bytes(bundle(version, extra=files), chunk=chunk, board=board)


@pytest.fixture(scope="session")
def releases():
    """Releases built once for the session (a bundle build takes a few seconds)."""
    made = {}

    def get(version, **kw):
        key = (version, tuple(sorted(kw.items())))
        if key not in made:
            made[key] = app_release(version, **kw)
        return made[key]

    return get


@pytest.fixture(scope="session")
def release_keys(tmp_path_factory):
    """The fleet's release-signing keys (`fleetwire release init`), made once for the session."""
    from fleetwire.host.identity.signing import ReleaseKeys

    return ReleaseKeys.create(str(tmp_path_factory.mktemp("release-keys")))


class OTABoard:
    """A board deployed with updates on, its console read from then on, and the update
    service that offers it releases and sees its vitals."""

    def __init__(self, board, service, request, broker, keys):
        self.board = board
        self.keys = keys
        self.service = service
        self.request = request
        self.broker = broker
        self.id = None
        self.console = None

    def deploy(self, **cfg):
        cfg.setdefault("ota", True)
        cfg.setdefault("ota_confirm_s", 20)
        cfg.setdefault("fw_version", "1.0.0")
        c = device_config(self.request, self.broker, **cfg)
        c["device_id"] = "ota-%d-%d" % (os.getpid(), next(_ids))
        self.id = c["device_id"]
        self.board.deploy(c, release_keys=self.keys.dir)
        self.console = self.board.watch()
        # a deadline, not a speed: a virtual board on a loaded machine took over 30 s to boot
        self.console.wait_for("main: connected", 90)
        return c

    @property
    def device(self):
        return self.service.devices.get(self.id)

    def ota(self):
        d = self.device
        return (d.ota if d else {}) or {}

    def wait_for(self, state, version, timeout=60):
        """Until the board's vitals say ota.state == state for `version` -> the ota member."""
        ok = self.service.wait(
            lambda devs: (
                devs.get(self.id) is not None
                and devs[self.id].ota.get("state") == state
                and devs[self.id].ota.get("version") == version
            ),
            timeout,
        )
        assert ok, "no vitals record with ota %s %s within %s s; last: %r\nconsole:\n%s" % (
            state,
            version,
            timeout,
            self.device and self.device.record,
            self.console.text[-3000:],
        )
        return self.ota()

    def wait_running(self, version, timeout=60):
        ok = self.service.wait(
            lambda devs: devs.get(self.id) is not None and devs[self.id].fw_version == version, timeout
        )
        assert ok, "the board never reported %s; last: %r\nconsole:\n%s" % (
            version,
            self.device and self.device.record,
            self.console.text[-3000:],
        )


@pytest.fixture
def ota_service(request, hil_broker, hil_ca, release_keys):
    from fleetwire.host.rollout.service import UpdateService

    kw = {"signer": release_keys.signer()}
    if hil_ca is not None:
        cert, key = request.getfixturevalue("host_credentials")("operator")
        kw.update(tls_ca=hil_ca.cert_path, tls_cert=cert, tls_key=key)
    s = UpdateService(
        hil_broker[0], hil_broker[1], client_id="ota-test-%d-%d" % (os.getpid(), next(_ids)), **kw
    )
    s.start()
    yield s
    s.stop()


# A virtual board for updates: OTA partitions (otadata, ota_0, ota_1), and a heap of 192K. The
# unix port is 64-bit, where the board program with mutual TLS, its store and vitals holds
# about 101 KB, and an update needs about 18 KB more than connecting alone (on a 32-bit ESP32
# about two thirds of each: bench/ota_heap.py), besides the app of each release.
OTA_HEAP = "192K"


@pytest.fixture
def ota_hil_board(request, tmp_path, hil_ca):
    yield from board(request, tmp_path, hil_ca, OTA_HEAP, ota=True)


@pytest.fixture
def ota_board(ota_hil_board, ota_service, request, hil_broker, release_keys):
    b = OTABoard(ota_hil_board, ota_service, request, hil_broker, release_keys)
    yield b
    if b.id:
        ota_service.withdraw([b.id])  # no retained offer left behind on the session's broker


__all__ = ["wait"]

"""Virtual boards in the fleet simulator (fleetwire.host.fleet.sim, `boards=`): the
MicroPython unix port behind a pseudo-terminal, each deployed as a board is and reporting
to the same broker."""

import os
import threading

from fleetwire.host.fleet.device import RELEASES


class BoardError(RuntimeError):
    """A virtual board of the simulation could not be started or deployed."""


class Boards:
    """`count` virtual boards, each deployed as a board is (fleetwire deploy: the .mpy
    build, boot.py, main.py and a config.json) and reporting as `board-<n>` to the
    broker every `period_s` seconds. Each board's console goes to console.log in its
    directory under `root`."""

    def __init__(self, root, count, host, port, period_s, heap="128K", fw_version=RELEASES[0], ca=None):
        self.root = root
        self.ca = (
            ca  # a fleet CA directory: each board gets its certificate as `fleetwire deploy --ca` gives it
        )
        self.count = count
        self.config = {
            "broker": host,
            "port": port,
            "period_s": period_s,
            "fw_version": fw_version,
            "wifi_ssid": "sim-lab",
            "wifi_password": "sim-lab",
        }  # the emulated WLAN joins any
        self.heap = heap
        self.boards = []
        self.ids = []
        self._stop = threading.Event()
        self._readers = []

    def start(self):
        """Start and deploy every board (blocking; a few seconds each)."""
        from fleetwire.host.rig.deploy import DeployError, deploy
        from fleetwire.host.rig.vboard import VirtualBoard, wait_for_prompt

        for i in range(self.count):
            d = os.path.join(self.root, "board-%d" % i)
            vb = VirtualBoard(d, heap=self.heap, board_id="b0a7d%07x" % i).start()
            self.boards.append(vb)
            if not wait_for_prompt(vb.port):
                raise BoardError("virtual board %d gave no prompt (its directory: %s)" % (i, d))
            dev = "board-%d" % i
            try:
                deploy(vb.port, dict(self.config, device_id=dev), mpy=True, log=lambda m: None, ca=self.ca)
            except DeployError as e:
                raise BoardError("deploying virtual board %d failed: %s" % (i, e))
            self.ids.append(dev)
            # its console into console.log from now on (not during deploy: mpremote owns
            # the port then)
            t = threading.Thread(
                target=self._log_console, args=(vb.port, os.path.join(d, "console.log")), daemon=True
            )
            t.start()
            self._readers.append(t)

    def _log_console(self, port, path):
        import select

        fd = os.open(port, os.O_RDONLY | os.O_NOCTTY | os.O_NONBLOCK)
        try:
            with open(path, "ab") as log:
                while not self._stop.is_set():
                    r, _, _ = select.select([fd], [], [], 0.2)
                    if r:
                        try:
                            log.write(os.read(fd, 4096))
                            log.flush()
                        except OSError:
                            return
        finally:
            os.close(fd)

    def stop(self):
        self._stop.set()
        for t in self._readers:
            t.join(2)
        for b in self.boards:
            b.stop()

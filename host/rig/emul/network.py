# network, as a virtual board emulates it: the station connects at once unless the
# board directory's `wlan` file says "down" (a test fails Wi-Fi on demand).
import _vboard

STA_IF = 0
AP_IF = 1
STAT_IDLE = 0
STAT_CONNECTING = 1
STAT_GOT_IP = 1010
STAT_NO_AP_FOUND = 201


_state = [{"active": False, "ssid": None}, {"active": False, "ssid": None}]


class WLAN:
    # one state per interface, as on a board: WLAN(STA_IF) twice is the same interface
    def __init__(self, interface=STA_IF):
        self._s = _state[interface]

    def active(self, on=None):
        if on is None:
            return self._s["active"]
        self._s["active"] = bool(on)

    def connect(self, ssid=None, key=None, **kw):
        self._s["ssid"] = ssid

    def disconnect(self):
        self._s["ssid"] = None

    def isconnected(self):
        s = self._s
        return s["active"] and s["ssid"] is not None and _vboard.read("wlan", "up") != "down"

    def status(self, param=None):
        if param == "rssi":
            return int(_vboard.read("rssi", "-58"))
        return STAT_GOT_IP if self.isconnected() else STAT_NO_AP_FOUND

    def ifconfig(self, *a):
        return ("127.0.0.1", "255.0.0.0", "127.0.0.1", "127.0.0.1")

    def config(self, *a, **k):
        if a and a[0] == "mac":
            return bytes.fromhex(_vboard.info().get("id", "000000000000"))
        return None

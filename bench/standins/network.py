# A stand-in for a board's `network` module, for mqtt_as on the unix port (bench/heap.py):
# a station interface that is up and connected at once (the host's own network is there).
STA_IF = 0
AP_IF = 1
STAT_IDLE = 1000
STAT_CONNECTING = 1001
STAT_GOT_IP = 1010


class WLAN:
    def __init__(self, interface=STA_IF):
        pass

    def active(self, *on):
        return True

    def connect(self, *a, **kw):
        pass

    def disconnect(self):
        pass

    def isconnected(self):
        return True

    def status(self, *a):
        return STAT_GOT_IP

    def config(self, *a, **kw):
        pass

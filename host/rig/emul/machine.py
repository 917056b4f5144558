# machine, as a virtual board emulates it (see README.md beside this file).
import _vboard

PWRON_RESET = 1
HARD_RESET = 2
WDT_RESET = 3
DEEPSLEEP_RESET = 4
SOFT_RESET = 5
_CAUSES = {
    "power_on": PWRON_RESET,
    "hard": HARD_RESET,
    "watchdog": WDT_RESET,
    "deepsleep": DEEPSLEEP_RESET,
    "soft": SOFT_RESET,
}


def unique_id():
    return bytes.fromhex(_vboard.info().get("id", "000000000000"))


def reset_cause():
    return _CAUSES.get(_vboard.info().get("reset_cause", "power_on"), HARD_RESET)


def reset():
    # The supervisor sees the mark and restarts the interpreter (the pty stays open,
    # as a USB UART does); nothing runs after this, as on a board.
    import time

    _vboard.write("reset", "soft")
    while True:
        time.sleep(1)


def soft_reset():
    reset()


class RTC:
    # RTC memory (ESP32: RTC_NOINIT, 2048 bytes): a file beside the board's flash that
    # machine.reset(), a crash and the watchdog leave and a power cut removes (vboard.py)
    def memory(self, data=None):
        p = _vboard.DIR + "/rtc"
        if data is None:
            try:
                with open(p, "rb") as f:
                    return f.read()
            except OSError:
                return b""
        if len(data) > 2048:
            raise ValueError("buffer too long")
        with open(p, "wb") as f:
            f.write(data)


def freq(*a):
    return 240000000


def idle():
    pass


class WDT:
    def __init__(self, id=0, timeout=5000):
        self.timeout = timeout

    def feed(self):
        pass


class Pin:
    IN = 0
    OUT = 1

    def __init__(self, *a, **k):
        self._v = 0

    def value(self, v=None):
        if v is None:
            return self._v
        self._v = v

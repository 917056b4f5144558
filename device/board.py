# The one place that touches board-only modules (machine, network, esp32). Every
# other module asks this one, so the host can stand in for a board: on the
# MicroPython unix port and on CPython the answers come from emulations (a virtual
# board sets them through `emulate`), never from a crash on a missing module.
import gc

try:
    import machine
except ImportError:
    machine = None
try:
    import network
except ImportError:
    network = None

try:
    from time import ticks_ms, ticks_diff
except ImportError:
    from .cpython import ticks_ms, ticks_diff

import time

# What the host's emulation answers (a virtual board or a test sets these).
emulate = {"rssi": -60, "vbat_mv": None, "reset_cause": "power_on", "unique_id": None}

_heap_min = [-1]
_reset = [None]  # emulated machine.reset(): a callable set by the host


def unique_id():
    """The chip's id as hex text (the MAC-derived id on an ESP32)."""
    if machine is not None and hasattr(machine, "unique_id"):
        try:
            return "".join("%02x" % b for b in machine.unique_id())
        except Exception:
            pass
    return emulate["unique_id"] or "host"


def reset_cause():
    """Why the board last started: power_on, deliberate, watchdog, panic, or brownout.

    machine.reset_cause() cannot tell a crash from the reset pin (both HARD_RESET
    on an ESP32), so a deliberate reset is marked in flash by whoever calls reset()
    (see fleetwire.vitals); HARD_RESET without that mark counts as a panic."""
    if machine is not None and hasattr(machine, "reset_cause") and hasattr(machine, "PWRON_RESET"):
        c = machine.reset_cause()
        if c == machine.PWRON_RESET:
            return "power_on"
        if c == getattr(machine, "WDT_RESET", -1):
            return "watchdog"
        if c in (getattr(machine, "SOFT_RESET", -1), getattr(machine, "DEEPSLEEP_RESET", -1)):
            return "deliberate"
        return "panic"
    return emulate["reset_cause"]


def reset():
    """Restart the board (machine.reset); on the host, what the emulation says."""
    if _reset[0] is not None:
        return _reset[0]()
    if machine is not None and hasattr(machine, "reset"):
        machine.reset()
    raise SystemExit("reset")


def rssi():
    """Wi-Fi signal in dBm, or None when not connected."""
    if network is not None and hasattr(network, "WLAN"):
        try:
            w = network.WLAN(network.STA_IF)
            return w.status("rssi") if w.isconnected() else None
        except Exception:
            return None
    return emulate["rssi"]


def vbat_mv():
    """Battery voltage in mV, or None on a board that does not measure it."""
    return emulate["vbat_mv"]


def heap_free():
    """Free heap in bytes (and the lowest seen is updated)."""
    free = gc.mem_free() if hasattr(gc, "mem_free") else 0
    if _heap_min[0] < 0 or free < _heap_min[0]:
        _heap_min[0] = free
    return free


def heap_min():
    """The lowest free heap seen by heap_free() since boot."""
    return _heap_min[0] if _heap_min[0] >= 0 else heap_free()


def _wall_ms():
    if hasattr(time, "time_ns"):
        t = time.time_ns() // 1000000
    else:
        t = int(time.time() * 1000)
    if t < 946684800000:  # a 2000-based clock
        t += 946684800000
    return t


# Reading the wall clock allocates (a big or a float number); ticks do not. So the
# clock is read once an hour and ticks count the rest (ticks wrap after 12 days:
# an hour is well inside).
_ep = [_wall_ms(), ticks_ms()]
_boot_ms = _ep[0]


def epoch_ms():
    """Milliseconds since 1970 (ports whose epoch is 2000 are corrected)."""
    now = ticks_ms()
    d = ticks_diff(now, _ep[1])
    if d > 3600000 or d < 0:
        _ep[0] = _wall_ms()
        _ep[1] = now
        return _ep[0]
    return _ep[0] + d


def uptime_ms():
    """Milliseconds since this module was first imported (about: since boot)."""
    return epoch_ms() - _boot_ms


def wlan_up():
    """True while the Wi-Fi station is connected (always True off-board)."""
    if network is None or not hasattr(network, "WLAN"):
        return True
    return network.WLAN(network.STA_IF).isconnected()


def wlan_connect(ssid, password, timeout_ms=20000):
    """Bring up Wi-Fi as a station; -> True when connected (True at once off-board)."""
    if network is None or not hasattr(network, "WLAN"):
        return True
    w = network.WLAN(network.STA_IF)
    w.active(True)
    if not w.isconnected():
        w.connect(ssid, password)
        t0 = ticks_ms()
        while not w.isconnected():
            if ticks_ms() - t0 > timeout_ms:
                return False
            time.sleep_ms(100) if hasattr(time, "sleep_ms") else time.sleep(0.1)
    return True

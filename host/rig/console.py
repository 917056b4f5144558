"""A serial console that survives the board: it timestamps each line, writes it to a
log if asked, reopens the port when the board resets or is unplugged, and can stop
when a pattern is seen (for scripts)."""

import datetime
import os
import re
import sys
import time


class ConsoleError(Exception):
    pass


def ports_here():
    try:
        from serial.tools import list_ports

        return [p.device for p in list_ports.comports()]
    except Exception:
        return []


# What the board prints while no console has its port open is gone: opening a serial port
# flushes what waited (pyserial does, as a USB-serial adapter's driver would), so a console
# opened after `deploy` reset the board can miss its boot and every line of a board that went
# quiet after it. reset=True restarts the board once the console listens: Ctrl-C stops the
# program (MicroPython's KeyboardInterrupt), Ctrl-D at the REPL soft-resets, and boot.py and
# main.py run again, from their first line on the console.
STOP_AND_SOFT_RESET = b"\r\x03\x03\x04"


def console(
    port, log=None, until=None, timeout=None, out=None, baud=115200, wait=False, clock=None, reset=False
):
    """Stream the port's lines -> the line that matched `until` (a regex), or None when
    `timeout` seconds passed. Raises ConsoleError for a port that does not exist
    (unless wait=True: then wait for it to appear). reset=True: soft-reset the board once the
    port is open, so that its lines from boot on are seen."""
    import serial

    out = out or sys.stdout
    pat = re.compile(until) if until else None
    end = time.monotonic() + timeout if timeout else None
    if not os.path.exists(port) and not wait:
        here = ports_here()
        raise ConsoleError(
            "no such serial port: %s%s"
            % (port, " (ports here: %s)" % ", ".join(here) if here else " (no serial ports found)")
        )
    logf = open(log, "a", encoding="utf-8") if log else None
    s = None
    buf = b""
    gone = False
    try:
        while end is None or time.monotonic() < end:
            if s is None:
                try:
                    s = serial.Serial(port, baud, timeout=0.2)
                    if reset:
                        s.write(STOP_AND_SOFT_RESET)
                        s.flush()
                        reset = False  # once: a port that comes back is the board's own reset
                    if gone:
                        _emit("[console] %s is back" % port, out, logf, clock)
                    gone = False
                except (serial.SerialException, OSError):
                    if not gone:
                        _emit("[console] %s is gone; waiting for it" % port, out, logf, clock)
                        gone = True
                    time.sleep(0.5)
                    continue
            try:
                data = s.read(512)
            except (serial.SerialException, OSError):
                s.close()
                s = None
                continue
            if not data:
                continue
            buf += data
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                text = line.rstrip(b"\r").decode("utf-8", "replace")
                _emit(text, out, logf, clock)
                if pat and pat.search(text):
                    return text
        return None
    finally:
        if s is not None:
            s.close()
        if logf:
            logf.close()


def _emit(text, out, logf, clock):
    now = clock() if clock else datetime.datetime.now()
    line = "[%s] %s" % (now.strftime("%H:%M:%S.%f")[:-3], text)
    out.write(line + "\n")
    out.flush()
    if logf:
        logf.write(line + "\n")
        logf.flush()

"""Flash MicroPython firmware onto ESP32-family boards with esptool (PyPI), one or
many at once, with the errors people actually meet named plainly: no such port,
port busy, no chip answering, wrong chip, missing or truncated firmware file, a
partition table that does not fit the firmware, a write that does not verify.

With `no_stub` esptool talks to the chip's ROM bootloader only (--no-stub: boards that
refuse the flasher stub, and virtual boards, which emulate the ROM); the ROM cannot
erase the whole chip, so the erase is done by writing erased bytes around the image
(compressed, that is a few KB on the wire) -- the flash ends as after erase-flash.
"""

import glob
import os
import re
import struct
import subprocess
import sys
import tempfile
import threading
import time

from fleetwire.host.rig import partitions as pt

# Where a MicroPython .bin from micropython.org goes (it starts with the bootloader).
OFFSETS = {"esp32": 0x1000, "esp32s2": 0x1000, "esp32s3": 0x0, "esp32c3": 0x0, "esp32c6": 0x0}
CHIPS = ("auto",) + tuple(OFFSETS)
APP_OFFSET = 0x10000  # the factory app partition in MicroPython's tables
_MAGIC = 0xE9


class FlashError(Exception):
    pass


class VerifyError(FlashError):
    """esptool wrote the image but the flash does not hold it (its MD5 check failed)."""


def expand_ports(specs):
    """--port values (paths or globs) -> sorted unique ports; a glob that matches nothing is an error."""
    ports = []
    for spec in specs:
        if any(c in spec for c in "*?["):
            hits = sorted(glob.glob(spec))
            if not hits:
                raise FlashError("no serial port matches %s" % spec)
            ports += hits
        else:
            ports.append(spec)
    return sorted(set(ports), key=ports.index)


def _image_end(data, at):
    """End offset of the ESP image at `at` in data, or None if it is cut short."""
    if len(data) < at + 24 or data[at] != _MAGIC:
        return None
    nseg = data[at + 1]
    hash_appended = data[at + 23] == 1
    p = at + 24
    for _ in range(nseg):
        if len(data) < p + 8:
            return None
        _, size = struct.unpack_from("<II", data, p)
        p += 8 + size
    p += 16 - (p - at) % 16  # padding and the checksum byte
    if hash_appended:
        p += 32
    return p if p <= len(data) else None


def check_firmware(path, chip=None):
    """Check a firmware file before touching a board -> its size."""
    if not os.path.exists(path):
        raise FlashError("no firmware file %s" % path)
    with open(path, "rb") as f:
        data = f.read()
    if not data:
        raise FlashError("firmware file %s is empty" % path)
    if data[0] != _MAGIC:
        raise FlashError(
            "%s is not an ESP32 firmware image (first byte 0x%02x, expected 0xe9)" % (path, data[0])
        )
    if _image_end(data, 0) is None:
        raise FlashError("firmware file %s is truncated (its first image is cut short)" % path)
    # a full MicroPython .bin holds the bootloader, the partition table and the app
    base = OFFSETS.get(chip or "", None)
    for b in (base,) if base is not None else (0x1000, 0x0):
        app = APP_OFFSET - b
        if len(data) > app and data[app] == _MAGIC:
            if _image_end(data, app) is None:
                raise FlashError("firmware file %s is truncated (the application image is cut short)" % path)
            break
    return len(data)


def _esptool(args, timeout=600, on_line=None):
    cmd = [sys.executable, "-m", "esptool"] + args
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = []

    def read():
        buf = b""
        while True:
            ch = p.stdout.read(1)
            if not ch:
                break
            if ch in b"\r\n":
                if buf:
                    line = buf.decode("utf-8", "replace")
                    out.append(line)
                    if on_line:
                        on_line(line)
                buf = b""
            else:
                buf += ch
        if buf:
            out.append(buf.decode("utf-8", "replace"))

    t = threading.Thread(target=read, daemon=True)
    t.start()
    try:
        p.wait(timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        t.join(2)
        raise FlashError("esptool gave no result within %d s: %s" % (timeout, (out or ["no output"])[-1]))
    t.join(5)
    return p.returncode, "\n".join(out)


def _explain(port, text):
    t = text.lower()
    if "could not exclusively lock" in t or "resource busy" in t or "resource temporarily unavailable" in t:
        return "port %s is busy: another program has it open (a console, mpremote, a second flash?)" % port
    if "no such file or directory" in t or "could not open port" in t:
        return "no such serial port: %s" % port
    if "wrong --chip" in t or re.search(r"this chip is (\S+), not (\S+)", t):
        m = re.search(r"this chip is (\S+?),? not (\S+?)[.\s]", text, re.I)
        return "wrong chip on %s: %s" % (
            port,
            ("it is %s, not %s" % (m.group(1), m.group(2))) if m else text[-200:],
        )
    if "md5 of file does not match" in t or "written flash region is empty" in t:
        return (
            "verification failed on %s: the flash does not hold what was written (esptool's MD5 check);"
            " flash again, and suspect the flash or the cable if it repeats" % port
        )
    if "failed to enter ram download mode" in t:
        return (
            "the bootloader on %s refused esptool's flasher stub (a virtual board runs none):"
            " flash with --no-stub" % port
        )
    if "failed to connect" in t or "no serial data received" in t or "invalid head of packet" in t:
        return "no chip answering on %s: is a board attached, in bootloader mode (hold BOOT, tap EN)?" % port
    lines = [x for x in text.strip().splitlines() if x.strip()]
    return "esptool failed on %s: %s" % (port, lines[-1] if lines else "no output")


def detect(port, connect_attempts=2, flash_size=False):
    """-> the chip on `port`, as esptool names it in lower case (esp32, esp32s3, ...);
    with flash_size, (chip, flash size in bytes or None), read with the ROM's SPI
    commands (esptool flash-id), which works without the stub."""
    if not os.path.exists(port):
        raise FlashError("no such serial port: %s" % port)
    rc, text = _esptool(
        [
            "--port",
            port,
            "--connect-attempts",
            str(connect_attempts),
            "--before",
            "default-reset",
            "--after",
            "no-reset",
            "--no-stub",
            "flash-id" if flash_size else "chip-id",
        ],
        timeout=60,
    )
    m = re.search(r"(?:Chip type|Chip is|Detected chip type):\s*(ESP32[-\w]*)", text)
    if not m:
        raise FlashError(_explain(port, text))
    name = m.group(1).lower().replace("-", "")  # e.g. esp32d0wdq6, esp32s3
    known = [k for k in OFFSETS if name.startswith(k)]
    chip = max(known, key=len) if known else name
    if not flash_size:
        return chip
    m = re.search(r"Detected flash size:\s*(\d+)\s*([KM])B", text)
    return chip, (int(m.group(1)) << (20 if m.group(2) == "M" else 10)) if m else None


def check_partitions(parts, firmware, chip=None):
    """A partition table to write with `firmware`: its app partition must be at 0x10000,
    where the firmware's app goes, and hold it. -> the app's size."""
    with open(firmware, "rb") as f:
        data = f.read()
    base = OFFSETS.get(chip or "", None)
    app_len = None
    for b in (base,) if base is not None else (0x1000, 0x0):
        at = APP_OFFSET - b
        end = _image_end(data, at) if len(data) > at and data[at] == _MAGIC else None
        if end is not None:
            app_len = end - at
            break
    slot = [p for p in parts if p.type == pt.TYPE_APP and p.offset == APP_OFFSET]
    if not slot:
        raise FlashError(
            "the partition table has no app partition at 0x%x, where the firmware's app goes" % APP_OFFSET
        )
    if app_len is not None and app_len > slot[0].size:
        raise FlashError(
            "the firmware's app (%d KB) does not fit in partition %s (%d KB)"
            % (-(-app_len // 1024), slot[0].label, slot[0].size // 1024)
        )
    return app_len


def _image_with_table(firmware, base, table):
    with open(firmware, "rb") as f:
        data = bytearray(f.read())
    if table is not None:
        at = pt.TABLE_OFFSET - base
        if len(data) < at + len(table):
            data += b"\xff" * (at + len(table) - len(data))
        data[at : at + len(table)] = table
    return bytes(data)


def flash_one(
    port,
    firmware,
    chip="auto",
    baud=460800,
    erase=True,
    progress=None,
    connect_attempts=2,
    no_stub=False,
    partitions=None,
):
    """Erase and write `firmware` (with the partition table `partitions`, [Partition],
    in place of its own) on the board at `port`; esptool's MD5 check of what it wrote
    must pass (VerifyError otherwise). -> {"port", "chip", "seconds", "verified"}."""
    t0 = time.monotonic()
    if no_stub and erase:
        found, size = detect(port, connect_attempts, flash_size=True)
    else:
        found, size = detect(port, connect_attempts), None
    if chip != "auto" and found != chip:
        raise FlashError("wrong chip on %s: it is %s, not %s" % (port, found, chip))
    if found not in OFFSETS:
        raise FlashError("%s on %s: no known MicroPython offset for this chip" % (found, port))
    check_firmware(firmware, found)
    table = None
    if partitions is not None:
        check_partitions(partitions, firmware, found)
        if size:
            try:
                pt.check(partitions, flash_size=size)
            except pt.PartitionTableError as e:
                raise FlashError("partition table for %s: %s" % (port, e))
        table = pt.to_binary(partitions)
    base = OFFSETS[found]
    args = ["--chip", found, "--port", port, "--baud", str(baud), "--connect-attempts", str(connect_attempts)]
    if no_stub:
        args.append("--no-stub")

    def line(s):
        m = re.search(r"(\d+(?:\.\d+)?)\s*%", s)
        if m and progress:
            progress(port, float(m.group(1)))

    with tempfile.TemporaryDirectory(prefix="fleetwire-flash-") as tmp:
        image = _image_with_table(firmware, base, table)
        path = firmware
        if table is not None:
            path = os.path.join(tmp, "firmware+table.bin")
            with open(path, "wb") as f:
                f.write(image)
        pairs = [hex(base), path]
        if erase and no_stub:
            if not size:
                raise FlashError(
                    "no flash size from the chip on %s, so it cannot be erased without the stub"
                    " (esptool flash-id found none)" % port
                )
            # the ROM has no chip erase: erased bytes before and after the image do it
            end = -(-(base + len(image)) // pt.SECTOR) * pt.SECTOR
            for name, start, stop in (("head", 0, base), ("tail", end, size)):
                if stop > start:
                    blank = os.path.join(tmp, "erased-%s.bin" % name)
                    with open(blank, "wb") as f:
                        f.write(b"\xff" * (stop - start))
                    pairs += [hex(start), blank]
        elif erase:
            rc, text = _esptool(args + ["erase-flash"], on_line=None)
            if rc:
                raise FlashError(_explain(port, text))
        rc, text = _esptool(args + ["write-flash", "-z"] + pairs, on_line=line)
    if rc:
        err = _explain(port, text)
        raise VerifyError(err) if err.startswith("verification failed") else FlashError(err)
    if progress:
        progress(port, 100.0)
    return {
        "port": port,
        "chip": found,
        "seconds": time.monotonic() - t0,
        "verified": text.count("Hash of data verified") >= len(pairs) // 2,
    }


def flash_many(
    ports, firmware, chip="auto", baud=460800, out=None, connect_attempts=2, no_stub=False, partitions=None
):
    """Flash several boards in parallel, one progress bar each -> [(port, result or error text)]."""
    out = out or sys.stdout
    check_firmware(firmware, chip if chip != "auto" else None)
    state = {p: 0.0 for p in ports}
    results = {}
    lock = threading.Lock()
    tty = hasattr(out, "isatty") and out.isatty()

    def draw(final=False):
        with lock:
            if tty and not final:
                out.write("\x1b[%dA" % len(ports) if draw.drawn else "")
            if tty or final:
                for p in ports:
                    pct = state[p]
                    bar = "#" * int(pct / 5)
                    status = results.get(p)
                    tail = (
                        ("ok" if isinstance(status, dict) else "FAILED")
                        if status is not None
                        else "%5.1f%%" % pct
                    )
                    out.write("%-24s [%-20s] %s\n" % (p, bar, tail))
                out.flush()
                draw.drawn = True

    draw.drawn = False

    def progress(port, pct):
        state[port] = pct
        draw()

    def work(port):
        try:
            results[port] = flash_one(
                port,
                firmware,
                chip,
                baud,
                progress=progress,
                no_stub=no_stub,
                connect_attempts=connect_attempts,
                partitions=partitions,
            )
        except FlashError as e:
            results[port] = str(e)
        draw()

    threads = [threading.Thread(target=work, args=(p,)) for p in ports]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if not tty:
        draw(final=True)
    out.write("\n%-24s %-10s %-8s %s\n" % ("port", "chip", "result", "detail"))
    for p in ports:
        r = results[p]
        if isinstance(r, dict):
            out.write("%-24s %-10s %-8s %.1f s\n" % (p, r["chip"], "ok", r["seconds"]))
        else:
            out.write("%-24s %-10s %-8s %s\n" % (p, "-", "FAILED", r))
    out.flush()
    return [(p, results[p]) for p in ports]

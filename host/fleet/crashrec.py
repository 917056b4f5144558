"""A crash record as a board sends it (fleetwire.crashsend: the bytes fleetwire.crash took, laid
out as device/crash.py says) -> the dict the collector lands. Decoded here, on the host: the
board sends the record as it is, and so holds neither the decoder nor JSON for it."""

CAUSES = ("exception", "power_on", "watchdog", "panic", "brownout")  # the record's kind (byte 24)


def sum16(b):
    """Fletcher-16 of b (crash.catch() computes it in line, crashsend.ok() checks it)."""
    x = y = 0
    for v in b:
        x = (x + v) % 255
        y = (y + x) % 255
    return y << 8 | x


def parse(b, device_id=None):
    """A record's bytes -> dict, or None when it is none (too short, no "FC", a sum that does
    not check, offsets out of order)."""
    b = bytes(b)
    if len(b) < 32 or b[0] != 70 or b[1] != 67:
        return None
    c = bytearray(b)
    c[6] = c[7] = 0
    if sum16(c) != b[6] | b[7] << 8:
        return None

    def u(i, k):
        return int.from_bytes(b[i : i + k], "little")

    def text(x):
        return x.decode("utf-8", "replace")

    t, r, m = u(4, 2), u(28, 2), u(30, 2)
    n, wd, nxt = b[25], b[26], b[27]
    ring = len(b) - n * wd
    if not 32 <= r <= m <= t <= ring:
        return None
    log = []
    for k in range(n if b[24] == 0 else 0):  # a reset's record: the log was not its boot's
        j = ring + (nxt + k) % n * wd
        line = b[j : j + wd].split(b"\0")[0]
        if line:
            log.append(text(line))
    typ, _, msg = text(b[r:m]).partition(": ")
    return {
        "crash_id": u(2, 2),
        "boot_id": u(8, 4),
        "uptime_s": u(12, 4),
        "heap_free": u(16, 4),
        "heap_largest": u(20, 4) or None,
        "kind": CAUSES[b[24]] if b[24] < len(CAUSES) else "unknown",
        "fw_version": text(b[32:r]),
        "type": typ or None,
        "message": msg if typ else None,
        "traceback": text(b[m:t]) or None,
        "log": log,
        "device_id": device_id,
        "ts": None,
    }

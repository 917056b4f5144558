"""A fake ESP32-family ROM bootloader on a pseudo-terminal, for testing the flash
tool's error paths without hardware: it answers esptool's SYNC, READ_REG and
GET_SECURITY_INFO the way a chip of the chosen kind does (just enough to be
detected), or stays silent (no chip), or sends noise."""

import os
import struct
import threading
import tty

# chip -> (chip id in GET_SECURITY_INFO or None for the magic-value chips, magic value)
CHIPS = {"esp32": (None, 0x00F01D83), "esp32c3": (5, 0x1B31506F), "esp32s3": (9, 0x9)}
SYNC, READ_REG, SECURITY_INFO = 0x08, 0x0A, 0x14


def slip(data):
    return b"\xc0" + data.replace(b"\xdb", b"\xdb\xdd").replace(b"\xc0", b"\xdb\xdc") + b"\xc0"


class FakeChip:
    def __init__(self, chip=None, noise=False):
        self.chip = chip
        self.noise = noise
        self.m, s = os.openpty()
        tty.setraw(s)
        self._slave = s
        self.port = os.ttyname(s)
        self.seen = []
        self._stop = False
        threading.Thread(target=self._run, daemon=True).start()

    def close(self):
        self._stop = True
        for fd in (self.m, self._slave):
            try:
                os.close(fd)
            except OSError:
                pass

    def _reply(self, op, value=0, data=b"", status=b"\x00\x00"):
        body = struct.pack("<BBHI", 1, op, len(data + status), value) + data + status
        os.write(self.m, slip(body))

    def _run(self):
        buf = b""
        while not self._stop:
            try:
                b = os.read(self.m, 4096)
            except OSError:
                return
            if self.noise:
                os.write(self.m, b"\x55\xaa garbage \x00" * 4)
                continue
            if self.chip is None:
                continue  # nobody home
            buf += b
            while b"\xc0" in buf:
                start = buf.index(b"\xc0")
                end = buf.find(b"\xc0", start + 1)
                if end < 0:
                    break
                pkt = buf[start + 1 : end].replace(b"\xdb\xdc", b"\xc0").replace(b"\xdb\xdd", b"\xdb")
                buf = buf[end:] if end - start == 1 else buf[end + 1 :]
                if len(pkt) < 8 or pkt[0] != 0:
                    continue
                self._command(pkt[1], pkt[8:])

    def _command(self, op, data):
        chip_id, magic = CHIPS[self.chip]
        self.seen.append(op)
        if op == SYNC:
            for _ in range(8):
                self._reply(SYNC, 0x12345678)
        elif op == READ_REG:
            addr = struct.unpack("<I", data[:4])[0]
            self._reply(READ_REG, magic if addr == 0x40001000 else 0)
        elif op == SECURITY_INFO:
            if chip_id is None:
                self._reply(op, 0, b"", b"\x01\x05")  # ESP32 ROM: command not supported
            else:
                self._reply(op, 0, struct.pack("<IB7BII", 0, 0, *([0] * 7), chip_id, 0))
        else:
            self._reply(op, 0)

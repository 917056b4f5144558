"""The ESP32's ROM serial bootloader (download mode), as a virtual board answers it:
SLIP-framed commands in, responses out, on the board's emulated flash. It speaks what
esptool sends to an ESP32 ROM with --no-stub: SYNC, READ_REG/WRITE_REG (the chip's
magic value, its eFuses -- the MAC is the board id -- and the SPI controller, through
which esptool runs flash commands such as RDID and SFDP), SPI_ATTACH, SPI_SET_PARAMS,
CHANGE_BAUDRATE, FLASH_BEGIN/DATA/END (the XOR checksum of each block checked),
FLASH_DEFL_BEGIN/DATA/END (zlib, as esptool -z sends), SPI_FLASH_MD5 (32 hex digits, as
the ROM answers) and READ_FLASH_SLOW. Responses carry the ESP32 ROM's 4 status bytes.
The flasher stub is not run: MEM_BEGIN is refused, so esptool needs --no-stub.

A test can ask for a write fault (corrupt_writes): in the next blocks that program
anything, one bit that should have been cleared stays set, after the block's checksum
passed: only esptool's MD5 check of the written region can catch it."""

import struct
import zlib

from fleetwire.host.rig.vflash import FlashRangeError

SYNC, WRITE_REG, READ_REG = 0x08, 0x09, 0x0A
FLASH_BEGIN, FLASH_DATA, FLASH_END = 0x02, 0x03, 0x04
MEM_BEGIN, MEM_END, MEM_DATA = 0x05, 0x06, 0x07
SPI_SET_PARAMS, SPI_ATTACH, READ_FLASH_SLOW, CHANGE_BAUDRATE = 0x0B, 0x0D, 0x0E, 0x0F
FLASH_DEFL_BEGIN, FLASH_DEFL_DATA, FLASH_DEFL_END, SPI_FLASH_MD5 = 0x10, 0x11, 0x12, 0x13

# ROM error codes (the second status byte)
E_INVALID_MSG, E_FAILED, E_CHECKSUM, E_WRITE, E_READ_LEN, E_DEFLATE = 0x05, 0x06, 0x07, 0x08, 0x0A, 0x0B

CHIP_MAGIC_REG, ESP32_MAGIC = 0x40001000, 0x00F01D83
EFUSE_BASE = 0x3FF5A000
SPI_BASE = 0x3FF42000
UART_CLKDIV_REG = 0x3FF40014
APB_CTL_DATE = 0x3FF6607C
RTCCALICFG1 = 0x3FF5F06C
GPIO_STRAP = 0x3FF44038
XTAL = 40000000
_SPI_CMD_USR = 1 << 18
_SIZE_IDS = {1 << 20: 0x14, 2 << 20: 0x15, 4 << 20: 0x16, 8 << 20: 0x17, 16 << 20: 0x18}


def slip(data):
    return b"\xc0" + data.replace(b"\xdb", b"\xdb\xdd").replace(b"\xc0", b"\xdb\xdc") + b"\xc0"


def checksum(data):
    x = 0xEF
    for b in data:
        x ^= b
    return x


class RomLoader:
    """RomLoader(flash, mac).feed(bytes from the host) -> bytes to send back. After a
    FLASH_END (or FLASH_DEFL_END) `finished` is True: the ROM runs the app, i.e. the
    board boots. Bytes that are not SLIP frames (a terminal, mpremote) end up in
    `foreign`: a ROM ignores them, a virtual board takes them as the sign that esptool
    is done and boots (see vboard.py)."""

    def __init__(self, flash, mac=b"\x24\x0a\xc4\x00\x00\x01", baud=115200):
        self.flash = flash
        self.mac = bytes(mac)
        self.corrupt_writes = 0
        self.finished = False
        self.foreign = b""
        self.commands = []  # opcodes seen, for tests and traces
        self._frame = None  # bytes of the frame being received, None between frames
        self._esc = False
        self._regs = {}
        self._write = None  # (next address, bytes left) of FLASH_BEGIN/FLASH_DEFL_BEGIN
        self._inflate = None
        self._set_baud(baud)

    # ---- registers

    def _efuse(self, n):
        m = self.mac
        crc = 0  # the MAC's CRC byte: esptool drops it
        words = {
            1: int.from_bytes(m[2:6], "big"),
            2: (crc << 16) | (m[0] << 8) | m[1],
            3: (1 << 9) | (1 << 15),  # package ESP32-D0WD, revision bit 0
            4: 0x34,  # the 8 MHz clock calibration (baud rate maths)
            5: 1 << 20,
        }  # revision bit 1: a v3.0 chip
        return words.get(n, 0)

    def _set_baud(self, baud):
        self._regs[UART_CLKDIV_REG] = max(1, round(XTAL / max(baud, 1)))

    def read_reg(self, addr):
        if addr == CHIP_MAGIC_REG:
            return ESP32_MAGIC
        if EFUSE_BASE <= addr < EFUSE_BASE + 0x100:
            return self._efuse((addr - EFUSE_BASE) // 4)
        if addr == APB_CTL_DATE:
            return 1 << 31  # revision bit 2
        if addr == RTCCALICFG1:
            return 1969 << 7  # with eFuse word 4: a 40 MHz crystal
        if addr == GPIO_STRAP:
            return 0x03  # GPIO0 low: download boot
        return self._regs.get(addr, 0)

    def write_reg(self, addr, value, mask):
        self._regs[addr] = (self._regs.get(addr, 0) & ~mask | value & mask) & 0xFFFFFFFF
        if addr == SPI_BASE and self._regs[addr] & _SPI_CMD_USR:
            self._spi_command()
            self._regs[addr] &= ~_SPI_CMD_USR

    def _spi_command(self):
        # esptool's run_spiflash_command: command in USR2, address in ADDR, answer in W0
        r = self._regs.get
        cmd = r(SPI_BASE + 0x24, 0) & 0xFF
        usr = r(SPI_BASE + 0x1C, 0)
        addr_len = ((r(SPI_BASE + 0x20, 0) >> 26) & 0x3F) + 1 if usr & (1 << 30) else 0
        addr = r(SPI_BASE + 0x04, 0) >> (32 - addr_len) if addr_len else 0
        out = 0
        if cmd == 0x9F:  # RDID: a Winbond part of the flash's size
            out = 0xEF | 0x40 << 8 | _SIZE_IDS.get(self.flash.size, 0x16) << 16
        elif cmd == 0x5A:  # SFDP
            out = 0x50444653 if addr == 0 else 0
        self._regs[SPI_BASE + 0x80] = out  # RDSR and the rest: 0 (idle, unprotected)

    # ---- framing

    def feed(self, data):
        out = []
        for b in data:
            if self._frame is None:
                if b == 0xC0:
                    self._frame = bytearray()
                else:
                    self.foreign += bytes([b])
                continue
            if self._esc:
                self._esc = False
                self._frame.append(0xC0 if b == 0xDC else 0xDB if b == 0xDD else b)
            elif b == 0xDB:
                self._esc = True
            elif b == 0xC0:
                frame, self._frame = bytes(self._frame), None
                if not frame:  # two delimiters in a row: this one opens the next frame
                    self._frame = bytearray()
                    continue
                out.append(self._packet(frame))
            else:
                self._frame.append(b)
        return b"".join(out)

    def _reply(self, op, val=0, data=b"", error=0):
        body = data + bytes([1 if error else 0, error, 0, 0])
        return slip(struct.pack("<BBHI", 1, op, len(body), val) + body)

    def _packet(self, p):
        if len(p) < 8 or p[0] != 0:
            return b""
        op, size, chk = p[1], struct.unpack_from("<H", p, 2)[0], struct.unpack_from("<I", p, 4)[0]
        data = p[8:]
        self.commands.append(op)
        if size != len(data):
            return self._reply(op, error=E_INVALID_MSG)
        try:
            return self._command(op, data, chk)
        except FlashRangeError:
            return self._reply(op, error=E_FAILED)

    # ---- commands

    def _command(self, op, data, chk):
        if op == SYNC:
            if data != b"\x07\x07\x12\x20" + b"\x55" * 32:
                return self._reply(op, error=E_INVALID_MSG)
            self._set_baud(115200)  # the ROM measures the baud rate on the 0x55s
            return self._reply(op, 0x20120707) * 8  # the ROM answers a SYNC eight times
        if op == READ_REG and len(data) == 4:
            return self._reply(op, self.read_reg(struct.unpack("<I", data)[0]))
        if op == WRITE_REG and data and len(data) % 16 == 0:
            for i in range(0, len(data), 16):
                addr, value, mask, _delay = struct.unpack_from("<IIII", data, i)
                self.write_reg(addr, value, mask)
            return self._reply(op)
        if op == SPI_ATTACH and len(data) == 8:
            return self._reply(op)
        if op == SPI_SET_PARAMS and len(data) == 24:
            return self._reply(op)
        if op == CHANGE_BAUDRATE and len(data) == 8:
            self._set_baud(struct.unpack("<I", data[:4])[0])
            return self._reply(op)
        if op in (FLASH_BEGIN, FLASH_DEFL_BEGIN) and len(data) == 16:
            size, _blocks, blocksize, offset = struct.unpack("<IIII", data)
            if size:
                self.flash.erase(offset, size)  # the ROM erases the whole range up front
            self._write = [offset, size, blocksize]
            self._inflate = zlib.decompressobj() if op == FLASH_DEFL_BEGIN else None
            return self._reply(op)
        if op in (FLASH_DATA, FLASH_DEFL_DATA) and len(data) >= 16:
            return self._data(op, data, chk)
        if op in (FLASH_END, FLASH_DEFL_END) and len(data) == 4:
            self._write = self._inflate = None
            self.finished = True  # leave the loader: run the app
            return self._reply(op)
        if op == SPI_FLASH_MD5 and len(data) == 16:
            addr, size = struct.unpack_from("<II", data)
            return self._reply(op, data=self.flash.md5(addr, size).encode())
        if op == READ_FLASH_SLOW and len(data) == 8:
            addr, size = struct.unpack("<II", data)
            if size > 64:
                return self._reply(op, error=E_READ_LEN)
            return self._reply(op, data=self.flash.read(addr, size).ljust(64, b"\xff"))
        if op == MEM_BEGIN:
            # a virtual board cannot run the code esptool would load into its RAM
            return self._reply(op, error=E_FAILED)
        return self._reply(op, error=E_INVALID_MSG)

    def _data(self, op, data, chk):
        n, seq = struct.unpack_from("<II", data)
        block = data[16:]
        if n != len(block):
            return self._reply(op, error=E_INVALID_MSG)
        if self._write is None or (op == FLASH_DEFL_DATA) != (self._inflate is not None):
            return self._reply(op, error=E_FAILED)
        if checksum(block) != chk & 0xFF:
            return self._reply(op, error=E_CHECKSUM)
        start, left, blocksize = self._write
        if self._inflate is not None:
            try:
                block = self._inflate.decompress(block, left + 1)
            except zlib.error:
                return self._reply(op, error=E_DEFLATE)
            if len(block) > left:
                return self._reply(op, error=E_WRITE)  # more than FLASH_DEFL_BEGIN announced
            addr = start
            self._write[0:2] = [start + len(block), left - len(block)]
        else:
            addr = start + seq * blocksize
        if self.corrupt_writes:
            block = self._fault(block)
        self.flash.write(addr, block)
        return self._reply(op)

    def _fault(self, block):
        for i, b in enumerate(block):
            if b != 0xFF:
                self.corrupt_writes -= 1
                zero = (~b & 0xFF) & -(~b & 0xFF)  # the lowest bit this byte clears
                return block[:i] + bytes([b | zero]) + block[i + 1 :]
        return block

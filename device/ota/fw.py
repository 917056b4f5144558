# fleetwire.ota's firmware target: an ESP32 app image written straight into the next OTA
# partition (esp32.Partition.get_next_update()), switched by set_boot() once its SHA-256
# matched, confirmed by Partition.mark_app_valid_cancel_rollback(); ESP-IDF's bootloader
# rolls back an image that resets before that. Loaded only for firmware updates.
#
# Progress is a 4-byte offset in ota/dl.pos, written after each chunk. NOR flash is erased
# a 4 KB block at a time, when a write first enters the block; a cut in the middle of a
# write can leave bits programmed past the recorded offset, so a resume checks that the
# rest of that block is still erased and otherwise starts the block again.
from .state import running_label

_BLOCK = 4096
_POS = "ota/dl.pos"


def confirm():
    import esp32

    esp32.Partition.mark_app_valid_cancel_rollback()


class FirmwareTarget:
    """FirmwareTarget(part=None): the next OTA partition, or `part` (any block device with the
    extended protocol and info(): a test's emulated flash)."""

    kind = "firmware"

    def __init__(self, part=None):
        if part is None:
            import esp32

            P = esp32.Partition
            part = P(P.RUNNING).get_next_update()
        self.part = part
        info = self.part.info()
        self.label = info[4]
        self.cap = info[3]
        self._pf = None
        self._pb = bytearray(4)

    def fits(self, m):
        if m["size"] > self.cap:
            from .ops import Refused

            raise Refused("space", m["version"], m["size"], "partition " + self.label, self.cap)

    def _pos(self):
        try:
            with open(_POS, "rb") as f:
                b = f.read(4)
            return b[0] << 24 | b[1] << 16 | b[2] << 8 | b[3] if len(b) == 4 else 0
        except OSError:
            return 0

    def _erased_from(self, p):
        # is the rest of p's block still erased?
        buf = bytearray(256)
        end = p - p % _BLOCK + _BLOCK
        while p < end:
            k = min(256, end - p, self.cap - p)
            if k <= 0:
                break
            mv = memoryview(buf)[:k]
            self.part.readblocks(0, mv, p)
            for b in mv:
                if b != 0xFF:
                    return False
            p += k
        return True

    def open(self, resume):
        p = self._pos() if resume else 0
        if p % _BLOCK and not self._erased_from(p):
            p -= p % _BLOCK  # torn: its block is erased and written again
            if p:
                self._save(p)
        try:
            self._pf = open(_POS, "r+b" if resume else "wb")
        except OSError:
            self._pf = open(_POS, "wb")
        self._record(p)
        return p

    def _save(self, p):
        with open(_POS, "wb") as f:
            f.write(bytes((p >> 24 & 255, p >> 16 & 255, p >> 8 & 255, p & 255)))

    def _record(self, p):
        b = self._pb
        b[0] = p >> 24 & 255
        b[1] = p >> 16 & 255
        b[2] = p >> 8 & 255
        b[3] = p & 255
        f = self._pf
        f.seek(0)
        f.write(b)
        f.flush()

    def write(self, buf, off, n, at):
        end = at + n
        blk = (at + _BLOCK - 1) // _BLOCK  # blocks this write enters (the one at `at` is erased already)
        while blk * _BLOCK < end:
            self.part.ioctl(6, blk)
            blk += 1
        self.part.writeblocks(0, memoryview(buf)[off : off + n], at)
        self._record(end)

    def close(self):
        if self._pf is not None:
            self._pf.close()
            self._pf = None

    def reader(self):
        return _Reader(self.part)

    def discard(self):
        import os

        self.close()
        try:
            os.remove(_POS)
        except OSError:
            pass

    def apply(self, m, st, buf, save):
        """Switch: note the trial first (the board's boot state), then set_boot(): a cut between
        the two finds the old image running and no set_boot(), and fleetwire.ota applies again."""
        st["prev"] = {
            "kind": "firmware",
            "label": running_label(),
            "app": st.get("app"),
            "version": st.get("version"),
            "sha": st.get("sha"),
        }
        prev = st["prev"]
        st["version"] = m["version"]
        st["sha"] = m["sha256"]
        st["trial"] = {
            "kind": "firmware",
            "version": m["version"],
            "sha": m["sha256"],
            "label": self.label,
            "set": False,
            "boots": 0,
        }
        st["last"] = None
        save()
        try:
            self.part.set_boot()
        except OSError as e:
            st["version"], st["sha"], st["prev"], st["trial"] = prev["version"], prev["sha"], None, None
            save()
            from .ops import Failed

            raise Failed("image", m["version"], "set_boot: %s" % (e.args[-1] if e.args else e))
        st["trial"]["set"] = True
        save()

    def revert(self, st, save):
        """Back to the image the last update replaced. It boots on trial too: ESP-IDF's
        bootloader would otherwise return to the newer image at the next reset."""
        import esp32

        p = st["prev"]
        cur = {
            "kind": "firmware",
            "label": running_label(),
            "app": st.get("app"),
            "version": st.get("version"),
            "sha": st.get("sha"),
        }
        st["trial"] = {
            "kind": "firmware",
            "version": p.get("version"),
            "sha": p.get("sha"),
            "label": p["label"],
            "set": False,
            "boots": 0,
            "revert": st.get("version"),
        }
        st["version"], st["sha"], st["prev"] = p.get("version"), p.get("sha"), cur
        save()
        esp32.Partition(p["label"]).set_boot()
        st["trial"]["set"] = True
        save()


class _Reader:
    """The partition read from 0 as a file: readinto() and a context manager."""

    def __init__(self, part):
        self.part = part
        self.pos = 0

    def readinto(self, buf):
        self.part.readblocks(0, buf, self.pos)
        self.pos += len(buf)
        return len(buf)

    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False

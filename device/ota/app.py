# fleetwire.ota's app-bundle target: the bundle is downloaded to ota/dl.bin (what is in the
# file is what was written: its size is the progress, and LittleFS keeps a file as it was at
# its last flush), then unpacked into the slot not in use (ota/a or ota/b) and switched to by
# rewriting ota/boot.json (fleetwire.otaboot): one rename, the old app or the new, never a mix.
import sys

from .state import SLOTS, slot_dir

_MP = sys.implementation.name == "micropython"


class AppTarget:
    kind = "app"

    def __init__(self, root="ota"):
        self.root = root
        self.path = root + "/dl.bin"
        self._f = None

    def fits(self, m):
        import os

        for p in (self.root, "/", "."):
            try:
                st = os.statvfs(p)
                free = st[0] * st[3]
                break
            except (OSError, AttributeError):
                pass
        else:
            return
        need = 2 * m["size"] + 8192  # the archive and its unpacked copy, beside the running app
        if free < need:
            from .ops import Refused

            raise Refused("space", m["version"], need, "the filesystem", free)

    def open(self, resume):
        import os

        if not resume:
            self.discard()
        self._f = open(self.path, "ab")
        try:
            return os.stat(self.path)[6]
        except OSError:
            return 0

    def write(self, buf, off, n, at):
        f = self._f
        if _MP:
            f.write(buf, off, n)  # MicroPython's stream write(buf, off, len): no slice, no copy
        else:
            f.write(memoryview(buf)[off : off + n])
        f.flush()  # committed: a cut after this keeps the chunk

    def close(self):
        if self._f is not None:
            self._f.close()
            self._f = None

    def reader(self):
        return open(self.path, "rb")

    def discard(self):
        import os

        self.close()
        try:
            os.remove(self.path)
        except OSError:
            pass

    def apply(self, m, st, buf, save):
        """Unpack into the free slot, then switch the boot state to it (save(): the atomic step)."""
        cur = st.get("app")
        new = SLOTS[1] if cur == SLOTS[0] else SLOTS[0]
        d = slot_dir(new)
        rmtree(d)
        mkdirs(d)
        with self.reader() as f:
            unpack(f, m["size"], d, buf, m["version"])
        with open(d + "/.done", "w") as f:
            f.write(m["sha256"])
        st["prev"] = {"kind": "app", "app": cur, "version": st.get("version"), "sha": st.get("sha")}
        st["app"] = new
        st["version"] = m["version"]
        st["sha"] = m["sha256"]
        st["trial"] = {"kind": "app", "version": m["version"], "sha": m["sha256"], "boots": 0}
        st["last"] = None
        save()

    def revert(self, st, save):
        """Back to the app the last update replaced (whole in its slot, or the deployed one)."""
        p = st.get("prev")
        st["app"], st["version"], st["sha"], st["prev"] = p.get("app"), p.get("version"), p.get("sha"), None
        save()


def mkdirs(d):
    import os

    parts = d.split("/")
    for i in range(1, len(parts) + 1):
        p = "/".join(parts[:i])
        if p:
            try:
                os.mkdir(p)
            except OSError:
                pass


def rmtree(d):
    import os

    try:
        names = [e[0] for e in os.ilistdir(d)] if hasattr(os, "ilistdir") else os.listdir(d)
    except OSError:
        return
    for n in names:
        p = d + "/" + n
        try:
            os.remove(p)
        except OSError:
            rmtree(p)
    try:
        os.rmdir(d)
    except OSError:
        pass


def unpack(f, size, d, buf, version="?"):
    """Write the files of the bundle archive in `f` (b"FWB1", count u32, then per file: name
    length u16, data length u32, name, data; little-endian) under `d`, through `buf`.
    Failed("bundle") for anything malformed; lengths are checked against `size` before use."""
    import struct
    from .ops import Failed

    h = bytearray(8)
    if f.readinto(h) != 8 or h[:4] != b"FWB1":
        raise Failed("bundle", version, "no FWB1 header")
    count = struct.unpack_from("<I", h, 4)[0]
    pos = 8
    for i in range(count):
        if f.readinto(memoryview(h)[:6]) != 6:
            raise Failed("bundle", version, "file %d of %d is cut short" % (i + 1, count))
        nlen, dlen = struct.unpack_from("<HI", h)
        pos += 6
        if not 0 < nlen <= 200 or pos + nlen + dlen > size:
            raise Failed("bundle", version, "file %d runs past the bundle's end" % (i + 1))
        name = f.read(nlen).decode()
        pos += nlen
        if name.startswith("/") or ".." in name.split("/") or "\\" in name or name == ".done":
            raise Failed("bundle", version, "file name %r is not a relative path" % name)
        if "/" in name:
            mkdirs(d + "/" + name.rsplit("/", 1)[0])
        with open(d + "/" + name, "wb") as out:
            left = dlen
            while left:
                n = f.readinto(buf) if left >= len(buf) else f.readinto(memoryview(buf)[:left])
                if not n:
                    raise Failed("bundle", version, "file %r is cut short" % name)
                if _MP:
                    out.write(buf, 0, n)
                else:
                    out.write(memoryview(buf)[:n])
                left -= n
        pos += dlen
    if pos != size:
        raise Failed("bundle", version, "%d bytes after its last file" % (size - pos))

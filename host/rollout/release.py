"""Releases for over-the-air updates (fleetwire.ota on the board): what is offered, and
the manifest that describes it.

Two kinds:
- an **app bundle**: the board tree as `fleetwire build` writes it (lib/fleetwire/..., .mpy
  or sources) plus the app's own files (app.py or app.mpy, modules beside it), packed in one
  archive: b"FWB1", a file count (u32), then per file its name length (u16), data length
  (u32), name and data, little-endian. It replaces the app and everything in /lib as one
  piece, so a board never runs a mix; `.fwversion` inside names the release.
- a **firmware image**: an ESP32 app image (the app partition's content, what `esptool
  image-info` reads); its version is the one in its app description (esp_app_desc_t).

The manifest the board is offered: {"v": 1, "op": "install", "version", "kind", "size",
"sha256", "chunk", "board"}, and "rollback" (the version it replaces) for an older release
offered on purpose. It goes signed by a release-signing key (fleetwire.host.identity.signing:
the update service signs it), so the image's hash and length, the version and the board
kind it is for are the operator's word. The board asks for chunks by the first 8 bytes of the
SHA-256 (the release's tag)."""

import hashlib
import json
import os
import struct
import subprocess
import tempfile

MAGIC = b"FWB1"
VERSION_FILE = ".fwversion"
DEFAULT_CHUNK = 1024  # fits a board client's default max_packet (1024) less the topic: the board
# asks for less when it must
MAX_NAME = 200


class ReleaseError(ValueError):
    """Not a release that can be offered; the text says why."""


def pack(files):
    """{relative path: bytes} -> a bundle archive."""
    out = [MAGIC, struct.pack("<I", len(files))]
    for name, data in sorted(files.items()):
        if isinstance(data, str):
            data = data.encode()
        _check_name(name)
        n = name.encode()
        out += [struct.pack("<HI", len(n), len(data)), n, data]
    return b"".join(out)


def _check_name(name):
    if not name or name.startswith("/") or ".." in name.split("/") or "\\" in name or name == ".done":
        raise ReleaseError("bundle file name %r must be a relative path without '..'" % name)
    if len(name.encode()) > MAX_NAME:
        raise ReleaseError("bundle file name %r is longer than %d bytes" % (name, MAX_NAME))


def unpack(data):
    """A bundle archive -> {path: bytes}; ReleaseError if it is malformed."""
    if data[:4] != MAGIC or len(data) < 8:
        raise ReleaseError("not an app bundle (no FWB1 header)")
    count = struct.unpack_from("<I", data, 4)[0]
    pos, files = 8, {}
    for i in range(count):
        if pos + 6 > len(data):
            raise ReleaseError("bundle file %d of %d is cut short" % (i + 1, count))
        nlen, dlen = struct.unpack_from("<HI", data, pos)
        pos += 6
        if pos + nlen + dlen > len(data):
            raise ReleaseError("bundle file %d runs past the archive's end" % (i + 1))
        name = data[pos : pos + nlen].decode("utf-8", "replace")
        _check_name(name)
        files[name] = data[pos + nlen : pos + nlen + dlen]
        pos += nlen + dlen
    if pos != len(data):
        raise ReleaseError("%d bytes after the bundle's last file" % (len(data) - pos))
    return files


def bundle(version, app_files=(), mpy=True, arch=None, extra=None, symbols=None):
    """Build an app bundle -> bytes: the board tree (`fleetwire build`, .mpy by default) under
    lib/, each of `app_files` (paths) at the top (.py compiled to .mpy with mpy, except
    boot.py/main.py, which never go in a bundle), `extra` ({name: bytes}) as given. symbols: a
    path to write the release's symbol map to (fleetwire.host.rig.symbols), kept beside it."""
    from fleetwire.host.rig import build

    if not version or len(version) > 31:
        raise ReleaseError("a release version is 1 to 31 characters, not %r" % version)
    files = {}
    with tempfile.TemporaryDirectory(prefix="fleetwire-bundle-") as out:
        for rel in build.build(out, mpy=mpy, arch=arch):
            if rel.startswith("lib" + os.sep) or rel.startswith("lib/"):
                with open(os.path.join(out, rel), "rb") as f:
                    files[rel.replace(os.sep, "/")] = f.read()
        for path in app_files:
            name = os.path.basename(path)
            if name in ("boot.py", "main.py"):
                raise ReleaseError(
                    "%s stays on the board (it picks the app): leave it out of the bundle" % name
                )
            if not os.path.isfile(path):
                raise ReleaseError("no such app file: %s" % path)
            if mpy and name.endswith(".py"):
                dst = os.path.join(out, name[:-3] + ".mpy")
                cmd = [build.mpy_cross_command(), "-o", dst, "-s", name]
                cmd += ["-march=" + arch] if arch else []
                r = subprocess.run(cmd + [path], capture_output=True, text=True)
                if r.returncode:
                    raise ReleaseError("mpy-cross failed on %s: %s" % (path, r.stderr.strip()))
                with open(dst, "rb") as f:
                    files[name[:-3] + ".mpy"] = f.read()
            else:
                with open(path, "rb") as f:
                    files[name] = f.read()
        if symbols and mpy:
            from fleetwire.host.rig import symbols as sym

            m = sym.load(os.path.join(out, build.SYMBOLS))
            m["release"] = version
            for path in app_files:
                if path.endswith(".py"):
                    with open(path) as f:
                        app = sym.make([(os.path.basename(path), os.path.basename(path), f.read())])
                    m["files"].update(app["files"])
            with open(symbols, "w") as f:
                json.dump(m, f, indent=0, sort_keys=True)
    files.update(extra or {})
    files[VERSION_FILE] = version.encode()
    return pack(files)


class Release:
    """A release to offer: kind ("app" or "firmware"), version, the bytes, and the manifest
    the board gets. `board` is the board kind it is for (fleetwire.ota.board_kind(): "esp32"
    on an ESP32 and on a virtual board); `chunk` the most bytes a chunk carries."""

    def __init__(self, kind, version, data, board="esp32", chunk=DEFAULT_CHUNK):
        if kind not in ("app", "firmware"):
            raise ReleaseError("a release is an app bundle or a firmware image, not %r" % kind)
        if not version or len(version) > 31 or not all(" " < c <= "~" and c not in '"\\' for c in version):
            raise ReleaseError(
                "a release version is 1 to 31 printable characters without quotes, not %r" % version
            )
        if not data:
            raise ReleaseError("release %s is empty" % version)
        if not 16 <= chunk <= 65535:
            raise ReleaseError("chunk must be 16..65535 bytes, not %d" % chunk)
        self.kind, self.version, self.data, self.board, self.chunk = kind, version, bytes(data), board, chunk
        self.sha256 = hashlib.sha256(self.data).hexdigest()
        self.tag = bytes.fromhex(self.sha256[:16])

    @property
    def size(self):
        return len(self.data)

    def manifest(self, **extra):
        m = {
            "v": 1,
            "op": "install",
            "version": self.version,
            "kind": self.kind,
            "size": self.size,
            "sha256": self.sha256,
            "chunk": self.chunk,
            "board": self.board,
        }
        m.update(extra)
        return m

    def manifest_json(self, **extra):
        return json.dumps(self.manifest(**extra), separators=(",", ":")).encode()

    @classmethod
    def from_bytes(cls, data, version=None, board="esp32", chunk=DEFAULT_CHUNK):
        """An app bundle (FWB1) or an ESP32 image (0xE9), told apart by their first bytes."""
        if data[:4] == MAGIC:
            files = unpack(data)
            v = files.get(VERSION_FILE, b"").decode("utf-8", "replace") or None
            if version and v and version != v:
                raise ReleaseError("the bundle says it is %s, not %s" % (v, version))
            if not (version or v):
                raise ReleaseError("the bundle names no version (.fwversion): give one")
            return cls("app", version or v, data, board, chunk)
        if data[:1] == b"\xe9":
            from fleetwire.host.rig import espimage

            try:
                img = espimage.verify(lambda o, n: data[o : o + n].ljust(n, b"\xff"), len(data))
            except espimage.ImageError as e:
                raise ReleaseError("not a bootable ESP32 app image: %s" % e)
            v = (img.app or {}).get("version")
            if version and v and version != v:
                raise ReleaseError("the image's app description says %s, not %s" % (v, version))
            if not (version or v):
                raise ReleaseError("the image has no app description naming its version: give one")
            return cls("firmware", version or v, data[: img.length], board, chunk)
        raise ReleaseError("neither an app bundle (FWB1) nor an ESP32 app image (0xE9)")

    @classmethod
    def from_file(cls, path, version=None, board="esp32", chunk=DEFAULT_CHUNK):
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            raise ReleaseError("cannot read release %s: %s" % (path, e.strerror))
        try:
            return cls.from_bytes(data, version, board, chunk)
        except ReleaseError as e:
            raise ReleaseError("%s: %s" % (path, e))

    def __repr__(self):
        return "Release(%s %s, %d bytes, sha256 %s...)" % (
            self.kind,
            self.version,
            self.size,
            self.sha256[:12],
        )

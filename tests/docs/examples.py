"""What the documentation's example tests share: where the examples are, and how one is
pointed at the test's broker."""

import os

from support import ROOT

SNIPPETS = os.path.join(ROOT, "docs", "snippets")
STANDINS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "standins")
# The broker every example names; a test points it at its own.
BROKER = '"broker.local"'


def snippet(name):
    with open(os.path.join(SNIPPETS, name), encoding="utf-8") as f:
        return f.read()


def pointed(name, host, port, dest):
    """The example `name` with its broker, "broker.local", made (host, port): the example's one
    difference from the page, written to file `dest` -> dest."""
    src = snippet(name)
    assert BROKER in src, "%s names no %s" % (name, BROKER)
    with open(dest, "w", encoding="utf-8") as f:
        f.write(src.replace(BROKER, '"%s", %d' % (host, port)))
    return str(dest)


def includes():
    """{snippet path: [the pages that include it]} over every page under docs/."""
    import glob
    import re

    found = {}
    for page in glob.glob(os.path.join(ROOT, "docs", "**", "*.md"), recursive=True):
        with open(page, encoding="utf-8") as f:
            for name in re.findall(r'^\s*--8<-- "([^"]+)"\s*$', f.read(), re.M):
                found.setdefault(name, []).append(os.path.relpath(page, ROOT))
    return found


def snippet_files():
    """Every file under docs/snippets/, as a path relative to it."""
    out = []
    for d, _, files in os.walk(SNIPPETS):
        out += [os.path.relpath(os.path.join(d, f), SNIPPETS) for f in files if "__pycache__" not in d]
    return sorted(out)


def command_lines(name):
    """The commands of a shell snippet: continuation lines joined, comments and blank lines
    left out -> [(line, text)]."""
    out, cur = [], ""
    for line in snippet(name).splitlines():
        if line.rstrip().endswith("\\"):
            cur += line.rstrip()[:-1] + " "
            continue
        cur += line
        text = cur.split(" #", 1)[0].strip() if not cur.lstrip().startswith("#") else ""
        cur = ""
        if text:
            out.append(text)
    return out

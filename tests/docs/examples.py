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

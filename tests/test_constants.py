"""The board's modules restate the numbers they share as private const() (compiled into the
bytecode: no lookup, no name held on a board's heap). Restated, they must not drift: a packet
type is packets.py's, and a value restated in several modules (a slot's state bit, a
subscription state, a record's kind) has one value everywhere. Error numbers are lines of
their own table each, tied to it in test_error_texts.py."""

import os
import re

from fleetwire.codec import packets

from support import ROOT, sources

CONST = re.compile(r"^_([A-Z][A-Z0-9_]*) = const\((.+?)\)", re.M)
ERROR_USE = re.compile(r"\b(?:say|fail_as|fail5)\(_([A-Z0-9_]+)|errors\.\w+\(say\(_([A-Z0-9_]+)")


def board_sources():
    for folder in ("device", "shared"):
        for name in sources(folder):
            with open(os.path.join(ROOT, folder, name), encoding="utf-8") as f:
                yield folder + "/" + name, f.read()


def restated():
    """{name: {module: value}} of the private constants, error numbers left out."""
    out = {}
    for mod, src in board_sources():
        errors = {a or b for a, b in ERROR_USE.findall(src)}
        for name, value in CONST.findall(src):
            if name not in errors:
                out.setdefault(name, {})[mod] = eval(value, {})  # a number or an expression of numbers
    return out


def test_packet_types_restated_on_the_board_are_the_codecs():
    seen = 0
    for name, values in restated().items():
        if hasattr(packets, name) and name != "MAX_REMAINING":
            for mod, v in values.items():
                assert v == getattr(packets, name), "%s: _%s = %r, packets.%s = %r" % (
                    mod,
                    name,
                    v,
                    name,
                    getattr(packets, name),
                )
                seen += 1
    assert seen >= 20  # session.py and wire.py restate them all, qos2.py and others some


def test_a_constant_restated_in_several_modules_has_one_value():
    several = {n: v for n, v in restated().items() if len(v) > 1}
    assert len(several) >= 10
    for name, values in several.items():
        assert len(set(values.values())) == 1, "_%s differs: %r" % (name, values)

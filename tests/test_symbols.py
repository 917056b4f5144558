"""The symbol map (fleetwire.host.rig.symbols): a build of .mpy with -O3 writes one, and it
turns a board's traceback, whose frames all say line 1, into files, lines and functions."""

import os

from fleetwire.host.rig import build, symbols

SRC = """\
class Sensor:
    def read(self):
        return self.raw() // 0

    def raw(self):
        return 1


def read():
    return Sensor().read()
"""


def test_functions_and_methods_are_mapped_with_their_lines():
    assert symbols.functions(SRC) == [
        ["Sensor.read", "read", 2, 3],
        ["Sensor.raw", "raw", 5, 6],
        ["read", "read", 9, 10],
    ]


def test_a_traceback_from_the_board_is_symbolicated():
    m = symbols.make([("sensor.py", "lib/app/sensor.py", SRC)], release="1.5.0")
    tb = (
        "Traceback (most recent call last):\n"
        '  File "main.py", line 12, in <module>\n'
        '  File "sensor.py", line 1, in raw\n'
        "ZeroDivisionError: divide by zero\n"
    )
    assert symbols.symbolicate(tb, m) == (
        "Traceback (most recent call last):\n"
        '  File "main.py", line 12, in <module>\n'  # a file with its lines: as it was
        '  File "lib/app/sensor.py", line 5-6 (Sensor.raw), in raw\n'
        "ZeroDivisionError: divide by zero\n"
    )
    # a name two functions share: both, for the person to choose
    two = symbols.symbolicate('  File "sensor.py", line 1, in read', m)
    assert "(Sensor.read)" in two and "(read)" in two


def test_an_mpy_build_writes_the_map_beside_lib_and_a_lines_build_none(tmp_path):
    build.build(str(tmp_path / "o3"), mpy=True)
    m = symbols.load(str(tmp_path / "o3" / build.SYMBOLS))
    (client,) = m["files"]["client.py"]
    assert client["path"] == "device/client.py"  # where a person reads it
    assert "MQTTClient.publish" in [f[0] for f in client["functions"]]
    assert len(m["files"]["state.py"]) == 1 and "crash.py" in m["files"]
    build.build(str(tmp_path / "lines"), mpy=True, lines=True)
    assert not os.path.exists(str(tmp_path / "lines" / build.SYMBOLS))

# The one error the codec raises, CodecError (a ValueError): every malformed or
# unencodable input ends there, with a message that says what is wrong and the rule it
# breaks, an MQTT 3.1.1 statement id ("MQTT-3.1.2-22") or, where the standard has none,
# its section ("§2.2.3"), which rule() returns. It lives in wire.py, the one module the
# device client loads (a module of its own would cost a board's heap); this is its name
# for everyone else.
from .wire import CodecError, fail_as  # noqa: F401


def rule(e):
    """The rule a CodecError names: the text between its message's last "[" and "]", or ""."""
    m = str(e)
    i = m.rfind("[")
    return m[i + 1 : -1] if i >= 0 and m[-1:] == "]" else ""

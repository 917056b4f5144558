# fleetwire: the MQTT client for MicroPython boards. On a board this folder is
# /lib/fleetwire (written by `fleetwire build`), with the codec as fleetwire/codec/.
# Names load on first use, so a program pays only for what it imports.
#
# The package holds fleetwire's base exception and say(), which words every error: each
# client module needs both, and a module of their own would cost a board its module
# (about 240 bytes). The classes a caller tells apart (errkinds.py) load with the first
# error that needs one, through __getattr__ below; errors.py is their documented home.
__version__ = "0.2.0"


class MQTTException(Exception):
    """Base of fleetwire's errors."""


def say(key, *values):
    """The text of error `key` (fleetwire.reasons, loaded now, not at import)."""
    try:
        from .reasons import TEXT
        from .codec.reasons import text

        return text(key, values, TEXT)
    except MemoryError:  # no room for the table: the key still says what broke
        return key


def __getattr__(name):
    if name == "MQTTClient":
        from .client import MQTTClient as v
    elif name[:1] != "_" and name[:1].isupper():  # an exception, from the module raising it
        m = "store" if name == "StoreFull" else "reconnect" if name == "SessionTakenOver" else "errkinds"
        v = getattr(__import__(__name__ + "." + m, None, None, ["_"]), name)
    else:
        # `from fleetwire import board`: on MicroPython this lookup comes here instead of
        # importing the submodule, so import it
        try:
            return __import__(__name__ + "." + name, None, None, ["_"])
        except ImportError:
            raise AttributeError(name)
    globals()[name] = v
    return v

# fleetwire: the MQTT client for MicroPython boards. On a board this folder is
# /lib/fleetwire (written by `fleetwire build`), with the codec as fleetwire/codec/.
# Names load on first use, so a program pays only for what it imports.
__version__ = "0.1.0"


def __getattr__(name):
    if name == "MQTTClient":
        from .client import MQTTClient as v
    elif name[:1] != "_" and name[:1].isupper():  # an exception, from the module raising it
        m = "store" if name == "StoreFull" else "reconnect" if name == "SessionTakenOver" else "errors"
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

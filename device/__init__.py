# fleetwire: the MQTT client for MicroPython boards. On a board this folder is
# /lib/fleetwire (written by `fleetwire build`), with the codec as fleetwire/codec/.
# The client loads on first use, so a program that only needs the codec
# (fleetwire.codec.*) does not pay for the client's RAM.
__version__ = "0.1.0"


def __getattr__(name):
    if name in ("MQTTClient", "MQTTException", "ConnectRefused", "QueueFull", "ProtocolError",
                "SessionTakenOver", "StoreFull"):
        from .client import (MQTTClient, MQTTException, ConnectRefused, QueueFull, ProtocolError,
                             SessionTakenOver, StoreFull)
        g = globals()
        g["StoreFull"] = StoreFull
        g["SessionTakenOver"] = SessionTakenOver
        g["MQTTClient"] = MQTTClient
        g["MQTTException"] = MQTTException
        g["ConnectRefused"] = ConnectRefused
        g["QueueFull"] = QueueFull
        g["ProtocolError"] = ProtocolError
        return g[name]
    if not name.startswith("_"):
        # `from fleetwire import board`: on MicroPython this lookup comes here
        # instead of importing the submodule, so import it.
        try:
            return __import__(__name__ + "." + name, None, None, ["_"])
        except ImportError:
            pass
    raise AttributeError(name)

# fleetwire: the MQTT client for MicroPython boards. On a board this folder is
# /lib/fleetwire (written by `fleetwire build`), with the codec as fleetwire/codec/.
from .client import MQTTClient, MQTTException, ConnectRefused, QueueFull, ProtocolError  # noqa: F401

__version__ = "0.1.0"

# fleetwire: the MQTT client for MicroPython boards (this folder is the board
# package; `fleetwire build` writes it with the codec as fleetwire/codec/).
__version__ = "0.1.0"

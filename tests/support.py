"""Constants the tests share (importable as `support`: tests/ is on sys.path)."""
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The heap a device program gets on the MicroPython unix port: an ESP32's, roughly.
DEVICE_HEAP = "96K"

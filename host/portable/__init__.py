"""Host-side code that also runs on MicroPython, put on MICROPYPATH by its folder (PATH):
the emulated NOR flash, the flash power-cut sweep, the virtual board's start-up program
and the codec's test vectors with their runner."""

import os

PATH = os.path.dirname(os.path.abspath(__file__))

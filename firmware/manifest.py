# Freeze fleetwire into a MicroPython firmware, so its code runs from flash and costs
# no heap (as .mpy in /lib it takes about 60 KB of RAM; frozen, a few KB of state).
#
#   fleetwire build --out build/board                     # from the repository root
#   cd micropython/ports/esp32
#   make BOARD=ESP32_GENERIC FROZEN_MANIFEST=/path/to/fleetwire/firmware/manifest.py
#
# Paths here are relative to this file, as in every MicroPython manifest.
include("$(PORT_DIR)/boards/manifest.py")   # the port's own frozen modules (asyncio, ...)
package("fleetwire", base_path="../build/board/lib", opt=3)

# Freeze fleetwire into a MicroPython firmware, so its code runs from flash: a connected
# client then holds about 20 KB of heap instead of 56 KB as .mpy in /lib (64-bit unix
# port, bench/client.py --micropython-src; a 32-bit ESP32 needs less).
#
#   fleetwire build --out build/board                     # from the repository root
#   cd micropython/ports/esp32
#   make BOARD=ESP32_GENERIC FROZEN_MANIFEST=/path/to/fleetwire/firmware/manifest.py
#
# Paths here are relative to this file, as in every MicroPython manifest.
include("$(PORT_DIR)/boards/manifest.py")   # the port's own frozen modules (asyncio, ...)
package("fleetwire", base_path="../build/board/lib", opt=3)

# Freeze fleetwire into a MicroPython firmware, so its code runs from flash: a connected
# client then holds about 21 KB of heap instead of 49 KB as .mpy in /lib on the 64-bit
# unix port, and 12 KB instead of 29 KB on a 32-bit build (bench/client.py --m32).
#
#   fleetwire build --out build/board                     # from the repository root
#   cd micropython/ports/esp32
#   make BOARD=ESP32_GENERIC FROZEN_MANIFEST=/path/to/fleetwire/firmware/manifest.py
#
# Paths here are relative to this file, as in every MicroPython manifest.
include("$(PORT_DIR)/boards/manifest.py")  # the port's own frozen modules (asyncio, ...)
package("fleetwire", base_path="../build/board/lib", opt=3)

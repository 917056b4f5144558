# Freeze fleetwire into a MicroPython firmware, so its code runs from flash: a umqtt.simple-style
# program, connected and subscribed, then holds 5.4 KB of heap instead of 19.9 KB with the
# client as .mpy in /lib (bench/heap.py, a 32-bit unix port: an ESP32's object sizes).
#
#   fleetwire build --out build/board                     # from the repository root
#   cd micropython/ports/esp32
#   make BOARD=ESP32_GENERIC FROZEN_MANIFEST=/path/to/fleetwire/firmware/manifest.py
#
# Paths here are relative to this file, as in every MicroPython manifest.
include("$(PORT_DIR)/boards/manifest.py")  # the port's own frozen modules (asyncio, ...)
package("fleetwire", base_path="../build/board/lib", opt=3)

fleetwire build --mpy --out build/board                  # .mpy, as a board loads them
fleetwire build --mpy --arch xtensawin --out build/esp32 # with native code for an ESP32
fleetwire build --out build/src                          # .py sources

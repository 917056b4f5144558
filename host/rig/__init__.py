"""Boards: virtual boards (the unix port behind a pty, an emulated ESP32 flash, bootloader
and ROM loader), firmware images and partition tables, flashing, deploy, the console,
the board tree's build and the unix port itself."""

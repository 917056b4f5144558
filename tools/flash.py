"""Flash MicroPython firmware onto ESP32-family boards with esptool: erase, then write
the image at the chip's offset (0x1000 for esp32/esp32s2, 0x0 for esp32s3/c3/c6), and
check what was written (esptool's MD5). --partitions writes a partition table (CSV or
binary) in place of the firmware's own; --no-stub talks to the ROM bootloader only (a
virtual board needs it). --port may be repeated or a glob, to flash several boards in
parallel with a progress bar each and a summary table at the end.

  fleetwire flash --port /dev/ttyUSB0 --firmware ESP32_GENERIC-20250415-v1.25.0.bin
  fleetwire flash --port /dev/ttyUSB0 --firmware fw.bin --partitions firmware/partitions-mqtt.csv
  fleetwire flash --port '/dev/ttyUSB*' --firmware fw.bin --chip esp32s3
"""

import sys


def add_arguments(p):
    from fleetwire.host.rig.flash import CHIPS

    p.add_argument("--port", action="append", required=True, help="serial port or glob (repeatable)")
    p.add_argument("--firmware", required=True, help="the MicroPython .bin")
    p.add_argument("--chip", default="auto", choices=CHIPS, help="expected chip (default: auto-detect)")
    p.add_argument("--baud", type=int, default=460800)
    p.add_argument(
        "--connect-attempts", type=int, default=2, help="esptool's connection attempts (default 2)"
    )
    p.add_argument("--partitions", help="a partition table (ESP-IDF's .csv, or .bin) to write at 0x8000")
    p.add_argument(
        "--no-stub",
        action="store_true",
        help="use the chip's ROM bootloader only, no flasher stub (virtual boards need this)",
    )


def run(args):
    from fleetwire.host.rig import partitions as pt
    from fleetwire.host.rig.flash import (
        FlashError,
        check_firmware,
        check_partitions,
        expand_ports,
        flash_many,
    )

    chip = None if args.chip == "auto" else args.chip
    parts = None
    try:
        ports = expand_ports(args.port)
        check_firmware(args.firmware, chip)
        if args.partitions:
            parts = pt.load(args.partitions)
            check_partitions(parts, args.firmware, chip)
    except OSError as e:
        print("fleetwire flash: cannot read %s: %s" % (e.filename, e.strerror), file=sys.stderr)
        return 2
    except (FlashError, pt.PartitionTableError) as e:
        where = "%s: " % args.partitions if isinstance(e, pt.PartitionTableError) else ""
        print("fleetwire flash: %s%s" % (where, e), file=sys.stderr)
        return 2
    results = flash_many(
        ports,
        args.firmware,
        args.chip,
        args.baud,
        connect_attempts=args.connect_attempts,
        no_stub=args.no_stub,
        partitions=parts,
    )
    failed = [r for _, r in results if not isinstance(r, dict)]
    for r in failed:
        print("fleetwire flash: %s" % r, file=sys.stderr)
    return 1 if failed else 0

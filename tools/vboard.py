"""Start virtual boards: the MicroPython unix port behind a pseudo-terminal each, so
mpremote, pyserial and `fleetwire deploy/console` use them as they would /dev/ttyUSB0.
Each board has its own directory (fs/ is its filesystem), emulated Wi-Fi, machine and
SPI flash (partition table, OTA slots, a bootloader that rolls back an unconfirmed
image, the ROM loader `fleetwire flash --no-stub` writes through), and restarts on
machine.reset() while its terminal stays open.
Runs until Ctrl-C; then every interpreter it started is stopped.

  fleetwire vboard                              # one board, prints its port
  fleetwire vboard --count 3 --link /tmp/board  # /tmp/board1 .. /tmp/board3
  mpremote connect /tmp/board1 exec "print('hi')"
"""

import sys
import time

from fleetwire.tools import options


def add_arguments(p):
    p.add_argument("--dir", default=".vboards", help="where the boards' directories go (default %(default)s)")
    p.add_argument("--count", type=int, default=1, help="how many boards (default 1)")
    p.add_argument("--heap", default="96K", help="MicroPython heap: 96K is ESP32-like, 32K ESP8266-like")
    p.add_argument("--link", help="make stable symlinks LINK1, LINK2, ... to the ptys")
    p.add_argument(
        "--ota",
        action="store_true",
        help="new boards get MicroPython's OTA partition table (otadata, ota_0, ota_1)",
    )


def run(args):
    from fleetwire.host.rig.vboard import parse_heap, start_boards

    try:
        parse_heap(args.heap)
        if args.count < 1:
            raise ValueError("--count must be at least 1")
        boards = start_boards(args.dir, args.count, args.heap, args.link, ota=args.ota)
    except (OSError, ValueError) as e:
        print("fleetwire vboard: %s" % e, file=sys.stderr)
        return 2
    for i, b in enumerate(boards, 1):
        app = "%s %s" % (b.boot.partition.label, b.boot.version) if b.boot else "halted: %s" % b.halt_reason
        print(
            "board-%d: %s%s  (id %s, heap %s, %s, dir %s)"
            % (i, b.port, " -> " + b.link if b.link else "", b.id, b.heap, app, b.dir),
            flush=True,
        )
    options.stop_on_signals()
    try:
        while True:
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    finally:
        for b in boards:
            b.stop()
        print("fleetwire vboard: stopped %d board(s)" % len(boards), flush=True)
    return 0

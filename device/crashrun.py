# Crash capture for a program of its own (fleetwire.runner needs none of it): install(), and
# run(main), which records what main() raises and resets the board. Loaded by such a program,
# or by install() in a program on asyncio: end() is the loop's exception handler, for a task
# that ends with an exception nobody awaits.
from . import crash


def install(release="", boot=0, lines=8, width=64, size=1024):
    """Take crashes from now on: the record (size bytes, its last lines x width the log
    ring) is allocated here, and nothing later. ValueError: a record RTC memory cannot hold
    (over 2048 bytes), or a ring that leaves the traceback too little of it."""
    from . import crashsend  # left loaded for keep() and Sender, whose close() drops it

    crashsend.install(crash._w, release, boot, lines, width, size)


def end(e, c=None):
    """Record e (or, as the asyncio loop's exception handler, c["exception"]), and reset."""
    if c is not None:
        e = c["exception"]
    crash.catch(e)
    try:
        import machine

        machine.reset()
    except (ImportError, AttributeError):  # the unix port's machine has no reset()
        pass
    raise SystemExit("reset")


def run(main, *args):
    """run(main, release="", boot=0, lines=8, width=64, size=1024): install() (unless it
    ran), then main(): an exception out of it is recorded and the board reset."""
    if crash._w.t is None:
        install(*args)
    try:
        main()
    except Exception as e:
        end(e)

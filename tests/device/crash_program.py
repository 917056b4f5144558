# Crash capture on the board (fleetwire.crash, fleetwire.crashsend), one scenario a run; each
# record taken is printed as a line "REC <hex>" (what was kept: the test decodes it with
# fleetwire.host.fleet.crashrec, as the collector does).
# argv: scenario [args]
#   random SEED N     N exceptions raised at random depths, of random types, each taken with
#                     the heap locked (allocating anything would raise MemoryError instead)
#   memory            a MemoryError from filling the heap, taken while it is still full
#   print             print() feeds the log ring (fleetwire.crashprint)
#   asyncio           a task that ends with an exception nobody awaits
#   callback HOST PORT   the client's callback raises inside check_msg(), under crashrun.run()
#   boot DIR BOOT     (a virtual board's machine on the path) catch, or with "keep" move the
#                     record from RTC memory to DIR -> "KEPT kind"
#   sweep             a power cut at every flash write of keep() and of the removal after
#                     the upload (LittleFS on an emulated NOR flash): "SWEEP cuts bad"
import binascii
import gc
import sys

import micropython

from fleetwire import crash, crashrun, crashsend

scenario = sys.argv[1]


class RTC:
    # RTC memory as on an ESP32: a fixed buffer, memory(b) copies in (no allocation)
    m = bytearray(2048)
    n = [0]

    def memory(self, b=None):
        if b is None:
            return bytes(RTC.m[: RTC.n[0]])
        for i in range(len(b)):
            RTC.m[i] = b[i]
        RTC.n[0] = len(b)


def show():
    print("REC", binascii.hexlify(RTC().memory()).decode())


def locked(e):
    # take and keep e with the heap locked: the crash path must allocate nothing
    gc.collect()
    micropython.heap_lock()
    try:
        crash.catch(e)
        ok[0] = 1
    except MemoryError:
        ok[0] = 0
    micropython.heap_unlock()
    if not ok[0]:
        print("ALLOCATED")


ok = [0]

if scenario == "random":
    seed, n = int(sys.argv[2]), int(sys.argv[3])
    x = seed

    def rnd(k):
        global x
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF
        return x % k

    def leaf(kind):
        if kind == 0:
            return {}["missing"]
        if kind == 1:
            return 1 // 0
        if kind == 2:
            raise ValueError("bad reading " + "x" * 200)  # a message past the record's limit
        return [][3]

    def middle(depth, kind):
        if depth:
            return middle(depth - 1, kind)
        return leaf(kind)

    crashrun.install("2.0.1", 17, 4, 24, 768)
    crash._w.r = RTC()
    for i in range(n):
        for j in range(rnd(7)):
            crash.log("step %d line %d of a long log line that is cut" % (i, j))
        depth, kind = rnd(6), rnd(4)
        print("RAISE", depth, kind)
        try:
            middle(depth, kind)
        except Exception as e:
            locked(e)
        show()

elif scenario == "print":
    crashrun.install("2.0.1", 8, 4, 32)
    crash._w.r = RTC()
    from fleetwire import crashprint  # noqa: F401

    print("reading", 3, "of", 5)
    print("to a file stays out", file=sys.stderr)
    crash.log("logged")
    print("x" * 40)
    try:
        print(1 // 0)
    except ZeroDivisionError as e:
        locked(e)
    show()

elif scenario == "memory":
    crashrun.install("2.0.1", 3)
    crash._w.r = RTC()
    crash.log("filling the heap")
    free = e = None  # globals made in the except clause would allocate
    hog = [None] * 3000  # its slots first: filling them allocates only the pieces
    try:
        size = 4096
        i = 0
        while True:
            try:
                hog[i] = bytearray(size)
                i += 1
            except MemoryError:
                if size <= 16:
                    raise
                size //= 4
    except MemoryError as e:  # noqa: F811 (e was made above)
        # the heap is full still (hog holds it): the record is taken now, with no allocation
        free = gc.mem_free()
        crash.catch(e)
        hog = None
        gc.collect()
        print("FREE", free)
    show()

elif scenario == "asyncio":
    import asyncio

    async def sensor():
        await asyncio.sleep_ms(5)
        raise OSError(110)

    async def main():
        asyncio.create_task(sensor())
        for _ in range(20):
            await asyncio.sleep_ms(10)

    crashrun.install("2.0.1", 4)
    crash._w.r = RTC()
    try:
        asyncio.run(main())
    except SystemExit as e:
        print("RESET", e)
    show()

elif scenario == "callback":
    from fleetwire import MQTTClient

    def on_message(topic, msg):
        crash.log(msg)
        return int(msg)  # a message the app cannot read

    def main():
        c = MQTTClient("crash-callback", sys.argv[2], int(sys.argv[3]), keepalive=30)
        c.set_callback(on_message)
        c.connect()
        c.subscribe("crash/callback", 1)
        c.publish("crash/callback", b"not a number", qos=1)
        while True:
            c.wait_msg()

    class machine:  # what install() finds as `machine`: RTC memory, and no reset()
        RTC = RTC

    sys.modules["machine"] = machine
    try:
        crashrun.run(main, "2.0.1", 5, 4, 32)
    except SystemExit as e:
        print("RESET", e)
    show()

elif scenario == "boot":
    d, boot = sys.argv[2], int(sys.argv[3])
    crashrun.install("2.0.1", boot)
    if sys.argv[4] == "keep":
        from fleetwire import board

        r = crashsend.keep(board.reset_cause(), boot, d)
        print("KEPT", r)
    else:
        crash.log("about to fail")
        try:
            {}["boot%d" % boot]
        except KeyError as e:
            crash.catch(e)

elif scenario == "sweep":
    import os
    import vfs

    from norflash import NorFlash, PowerCut

    def record(boot):
        crashrun.install("2.0.1", boot)
        crash._w.r = RTC()
        crash.log("line")
        try:
            crash.log(1 // 0)
        except ZeroDivisionError as e:
            crash.catch(e)

    def mount(f):
        try:
            vfs.umount("/fl")
        except OSError:
            pass
        vfs.mount(vfs.VfsLfs2(f, mtime=False), "/fl")

    def files():
        try:
            return sorted(x for x in os.listdir("/fl/crash") if not x.endswith(".t"))
        except OSError:
            return []

    def whole(name):
        with open("/fl/crash/" + name, "rb") as fh:
            b = fh.read()
        return b if crashsend.ok(b) else None

    cuts = bad = 0
    k = 1
    while True:
        f = NorFlash(24, block_size=512)
        vfs.VfsLfs2.mkfs(f)
        mount(f)
        crashsend.KEEP = 2
        record(1)
        crashsend.keep(None, 1, "/fl/crash")  # an older record waiting
        record(2)
        want = RTC().memory()
        key = "2.%d" % (want[2] | want[3] << 8)
        f.arm(k)
        done = False
        try:
            crashsend.keep(None, 2, "/fl/crash")
            # sent: the older one's ack removes it
            os.remove("/fl/crash/" + files()[0])
            done = True
        except (PowerCut, OSError):
            pass
        f.power_on()
        f.disarm()
        if done:
            break
        cuts += 1
        soft = f.copy()  # the same cut, as a reset that keeps RTC memory leaves it
        n = RTC.n[0]
        RTC.n[0] = 0  # a power cut: RTC memory is gone
        mount(f)
        got = files()
        for name in got:  # whole or not there
            if whole(name) is None:
                print("TORN", k, name)
                bad += 1
        # the older record goes only once the newer is on flash; the newer may be lost with
        # RTC memory, never torn
        if not [x for x in got if x.startswith("1.")] and key not in got:
            print("LOST", k, got)
            bad += 1
        RTC.n[0] = n
        mount(soft)
        crashsend.keep(None, 2, "/fl/crash")  # the next boot moves it again: one copy, whole
        got = files()
        if key not in got or whole(key) != want:
            print("SOFT", k, got)
            bad += 1
        k += 1
    print("SWEEP", cuts, bad)

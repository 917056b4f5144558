# What the device programs of bench/heap.py share; each program is a module of its own, run
# as .mpy on the MicroPython unix port, so that it holds only what such a program would:
#   micropython -m heap_sync|heap_mqtt_as|heap_aio PROGRAM MODE HOST PORT
# PROGRAM: umqtt | mqtt_as | aio | fw[+FEATURE...] (heap_sync.py says which).
# MODE: steps (print the heap after each step) | scenario (no measuring: for the smallest heap).
# The scenario: import, construct, connect, subscribe, 100 QoS 1 publishes, "READY" (the host
# then publishes 10 messages to bench/in), receive them, disconnect, "DONE". In steps mode
# "BASE <bytes>" is the heap in use before the program starts, and after each step
# "STEP <name> <bytes since then>" and "MODS <every module in sys.modules>" (the host takes
# the differences).
import sys
import gc

prog, mode, host, port = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
feats = prog.split("+")
inbox = []
base = 0


def mem():
    gc.collect()
    return gc.mem_alloc()


def cb(topic, msg, *_):
    inbox.append(msg)


def start():
    # the program begins: what is in the heap now is the harness's and the interpreter's
    global base
    base = mem()
    step("base")


def step(name):
    if mode == "steps":
        if name == "base":
            print("BASE", base)
        print("STEP", name, mem() - base)
        print("MODS", " ".join(sys.modules))


def ready():
    print("READY")


def fail_fast(asyncio):
    # a task that dies (of a MemoryError, in a heap too small) ends the run now, rather than
    # leave the others waiting until the host's deadline
    def died(loop, context):
        print("task died:", repr(context["exception"]))
        sys.exit(1)

    asyncio.get_event_loop().set_exception_handler(died)

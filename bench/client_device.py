# The device side of bench/client.py: one measurement per run, on the MicroPython
# unix port (or CPython), for fleetwire or umqtt.simple (same API subset).
#   micropython client_device.py CLIENT WHAT HOST PORT [N]
# CLIENT: fleetwire | umqtt.  WHAT: import | qstr | connect | alloc0 | alloc1 | allocrx0 | allocrx1 | rx0 |
#   calls0[-nodelay|-nagle|-code] | rate0[-nodelay|-nagle] | rate1[-nodelay|-nagle] | scenario
# Prints one line "RESULT <what> <number>" (bytes, or messages for the rates).
import sys
import gc

MP = sys.implementation.name == "micropython"
client, what, host, port = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
n = int(sys.argv[5]) if len(sys.argv) > 5 else 2000


def mem():
    gc.collect()
    return gc.mem_alloc() if MP else 0


if what == "qstr":
    # interned names the import adds: micropython.qstr_info() prints its pool totals,
    # before and after (the host takes the difference of n_total_bytes)
    import micropython

    micropython.qstr_info()
base = mem()
if client == "fleetwire":
    from fleetwire import MQTTClient
else:
    from umqtt.simple import MQTTClient
if what == "import":
    print("RESULT import", mem() - base)
    sys.exit(0)
if what == "qstr":
    micropython.qstr_info()
    print("MODULES " + " ".join(m for m in sys.modules if m.startswith(client)))
    print("RESULT qstr 0")
    sys.exit(0)

inbox = []


def cb(t, m):
    inbox.append(m)


c = MQTTClient(b"bench-" + client.encode() + b"-" + what.encode(), host, port, keepalive=60)
c.set_callback(cb)
c.connect()
c.subscribe(b"bench/in", 1)
if what == "connect":
    print("RESULT connect", mem() - base)
    c.disconnect()
    sys.exit(0)

topic = b"bench/out"
payload = b"x" * 64


QUEUE = 16  # fleetwire's default queue_size


def same_socket_option(what):
    # WHAT-nodelay / WHAT-nagle: the same TCP_NODELAY setting for both clients
    # (fleetwire sets it, umqtt.simple does not)
    if what.endswith("-nodelay") or what.endswith("-nagle"):
        c.sock.setsockopt(6, 1, 1 if what.endswith("-nodelay") else 0)  # IPPROTO_TCP, TCP_NODELAY


def ready(word="READY"):
    # tells the host to start publishing (MORE: the rest)
    print(word)
    if hasattr(sys.stdout, "flush"):
        sys.stdout.flush()


def fed(qos):
    """Subscribe to bench/rx with a callback that only counts, then say READY -> [count]."""
    got = [0]

    def count(t, m):
        got[0] += 1

    c.set_callback(count)
    c.subscribe(b"bench/rx", qos)
    ready()
    return got


def publish(qos):
    if client == "fleetwire" and qos:
        # pipelined: wait for room in the queue, then publish without blocking (a full
        # queue would raise QueueFull, an exception object each time)
        while c.pending >= QUEUE:
            c.loop(5)
        return c.publish(topic, payload, False, qos, block=False)
    c.publish(topic, payload, False, qos)


if what in ("alloc0", "alloc1"):
    qos = int(what[-1])
    for _ in range(50):
        publish(qos)
    if client == "fleetwire":
        while c.pending:
            c.loop(5)
    k = 100
    gc.collect()
    gc.disable()
    a = gc.mem_alloc() if MP else 0
    for _ in range(k):
        publish(qos)
        if client == "fleetwire":
            c.check_msg()
    b = gc.mem_alloc() if MP else 0
    gc.enable()
    print("RESULT %s %d" % (what, (b - a) // k))
    c.disconnect()
    sys.exit(0)

if what in ("allocrx0", "allocrx1"):
    # bytes allocated per message received at QoS 0 / 1 (64 B on bench/rx: 20 sent by the
    # host after READY to warm up, then 100 measured, sent after MORE), the callback only
    # counting
    got = fed(int(what[-1]))
    while got[0] < 20:
        c.wait_msg()
    ready("MORE")
    gc.collect()
    gc.disable()
    a = gc.mem_alloc() if MP else 0
    while got[0] < 120:
        c.wait_msg()
    b = gc.mem_alloc() if MP else 0
    gc.enable()
    print("RESULT %s %d" % (what, (b - a) // 100))
    c.disconnect()
    sys.exit(0)

if what == "rx0":
    # received QoS 0 messages per second, device side: the host publishes n messages of 64 B
    # after READY; they pile up in the socket while the device sleeps, then it drains them
    import time

    got = fed(0)
    time.sleep_ms(1500)

    def drain(c, got, n):
        t0 = time.ticks_us()
        while got[0] < n:
            c.wait_msg()
        return time.ticks_diff(time.ticks_us(), t0)

    dt = drain(c, got, n)
    print("RESULT rx0 %d" % (n * 1000000 // dt))
    c.disconnect()
    sys.exit(0)

if what.startswith("calls0"):
    # the device's own cost of a QoS 0 publish, from its clock: the client's code and its
    # socket writes, with each client's own socket options or the same for both;
    # calls0-code: the writes go to /dev/null, leaving the client's own code (on a board,
    # where the interpreter is tens of times slower, that is the cost that counts)
    import time

    same_socket_option(what)
    if what == "calls0-code":
        null = open("/dev/null", "wb")
        if client == "fleetwire":
            c._send = null.write  # bound to the socket's write when it connected
        else:
            c.sock = null

    def timed(pub, topic, payload, n):
        # locals only: the harness's own globals stay off the measured path (where a name
        # lands in its dict moved this figure by half)
        t0 = time.ticks_us()
        for _i in range(n):
            pub(topic, payload, False, 0)
        return time.ticks_diff(time.ticks_us(), t0)

    # not bench/out: the subscriber counting the rates must not see these
    dt = timed(c.publish, b"bench/calls", payload, n)
    print("RESULT %s %d" % (what, n * 1000000 // dt))
    if what != "calls0-code":
        c.disconnect()
    sys.exit(0)

if what.startswith("rate"):
    # rate0 / rate1, with each client's own socket options or the same for both
    qos = int(what[4])
    same_socket_option(what)
    print("GO")
    if hasattr(sys.stdout, "flush"):
        sys.stdout.flush()
    for _i in range(n):
        publish(qos)
    if client == "fleetwire":
        while c.pending:
            c.loop(5)
    print("RESULT %s %d" % (what, n))
    c.disconnect()
    sys.exit(0)

if what == "scenario":
    # connect + subscribe (done), 100 QoS 1 publishes, then receive 10 messages
    for _i in range(100):
        c.publish(topic, payload, False, 1)
    ready()
    while len(inbox) < 10:
        c.wait_msg()
    print("RESULT scenario 1")
    c.disconnect()

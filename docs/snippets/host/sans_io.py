# The session without a socket: bytes and time go in, bytes to write and events come out.
# Here the program plays the broker with the codec's packet objects.
from fleetwire.codec import packets as P
from fleetwire.feed import feed
from fleetwire.session import Session


def written(s, n):  # what an I/O loop writes: tx, then a long message's payload
    return bytes(s.tx[: n - len(s.tail)]) + bytes(s.tail) if s.tail else bytes(s.tx[:n])


now = 0  # milliseconds, from any clock
s = Session(b"sensor-17", keepalive=30)
s.on_delivered = lambda pid: print("delivered", pid)
print(P.decode_all(written(s, s.start(now))))  # CONNECT, to be written first
feed(s, P.Connack(False, 0).encode(), now)  # the broker's answer, as if read from the link
pid = s.publish(b"fleet/sensor-17/temp", b"21.5", qos=1)
print(P.decode_all(written(s, s.pack(now))))  # the PUBLISH, now due
s.last_out = now  # written
feed(s, P.Puback(pid).encode(), now)
print("pending", s.pending, "- next deadline in", s.tick(now), "ms")

# fleetwire.pieces: a message longer than the client's max_packet reaches the callback in pieces,
# with client.rest the bytes still to come after each. Commands and desired state need a message
# whole: they load this module with the first long one, and join its pieces here in one buffer
# of the message's length, allocated up to `cap` bytes only (a length field never sizes an
# allocation past what the program allowed). A longer one is read to its end and given as
# None, its length in .over and its first bytes in .head, so the module can say why it was not
# taken. A piece that does not continue the message begun starts a new one: the one begun was
# cut off with its connection, and the broker sends it again whole.


class Pieces:
    def __init__(self, cap):
        self.cap = cap
        self.t = self.n = self.over = 0  # the message's length, the bytes of it so far
        self.b = self.head = None

    def feed(self, msg, rest):
        """A piece and client.rest -> the whole message after its last piece (None before, and
        None for one longer than cap)."""
        n = len(msg)
        if not self.t or self.n + n + rest != self.t:
            if not rest:
                self.t = 0
                return msg  # whole already
            self.t = t = n + rest
            self.n = self.over = 0
            self.b = None
            self.head = bytes(msg[:128])
            if t > self.cap:
                self.over = t
            else:
                try:
                    self.b = bytearray(t)
                except MemoryError:
                    self.over = t
        if self.b is not None:
            self.b[self.n : self.n + n] = msg
        self.n += n
        if rest:
            return None
        self.t = 0
        b, self.b = self.b, None
        return b

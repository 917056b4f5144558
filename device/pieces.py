# fleetwire.pieces: a message longer than the client's max_packet reaches the callback in pieces,
# with client.rest the bytes still to come after each. Commands and desired state need a JSON
# document whole: they load this module with the first long one, which writes its pieces to a
# file on flash as they come (as the OTA agent writes an image) and parses it from there, so
# the heap holds only the parsed result, never the text, and no length field sizes an
# allocation. The only limits are the flash's room and the heap's room for the result: a
# document that does not fit is read to its end and raises OSError (flash) or MemoryError
# (heap) after its last piece, with its length in .t and its first bytes in .head, so the
# module can say why it was not taken. A piece that does not continue the message begun
# starts a new one: the one begun was cut off with its connection, and the broker sends it
# again whole (a power cut leaves a partial file, which the next long message overwrites).
import json


class Pieces:
    def __init__(self, path):
        self.path = path
        self.t = self.n = 0  # the message's length, the bytes of it so far
        self.f = self.e = self.head = None

    def feed(self, msg, rest):
        """A piece and client.rest -> None before the last piece, then the parsed document (it
        raises what parsing or the flash raised)."""
        n = len(msg)
        if self.n == self.t or self.n + n + rest != self.t:  # none begun, or a new one
            self._close()
            self.t = n + rest
            self.n = 0
            if not rest:
                self.n = n
                return json.loads(bytes(msg))  # whole already
            self.e = None
            self.head = bytes(msg[:128])
            try:
                self.f = open(self.path, "wb")
            except OSError as e:
                self.e = e
        if self.f:
            try:
                self.f.write(msg)
            except OSError as e:  # the flash is full: read on to the end, then say so
                self.e = e
                self._close()
        self.n += n
        if rest:
            return None
        self._close()
        try:
            if self.e:
                raise self.e
            with open(self.path) as f:
                return json.load(f)
        finally:
            import os

            try:
                os.remove(self.path)
            except OSError:
                pass

    def _close(self):
        if self.f:
            self.f.close()
            self.f = None

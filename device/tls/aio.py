# TLS for AsyncClient, loaded by its first connect() with ssl=. On MicroPython the port's
# open_connection() wraps a socket it keeps to itself, and a handshake that fails (a
# certificate that does not verify) frees the TLS layer without closing that socket: each
# failed attempt would leak one, and an ESP32 has about ten. Here the client holds the
# socket and closes it with the stream; a failed verification (a ValueError there) is an
# OSError, a failure of the link that reconnect=True retries, as in tls.py. CPython's
# open_connection() does both already.
import asyncio

try:
    from asyncio import core  # noqa: F401  (MicroPython's asyncio)
except ImportError:
    core = None


async def open_tls(host, port, ctx):
    """-> (reader, writer) of a TLS connection; the handshake runs in the first writes and
    reads (the CONNACK deadline covers it)."""
    if core is None:
        return await asyncio.open_connection(host, port, ssl=ctx, server_hostname=host)
    if ctx is True:
        import ssl

        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    s = (await asyncio.open_connection(host, port))[1].s  # the TCP connection, made
    try:
        t = ctx.wrap_socket(s, server_hostname=host, do_handshake_on_connect=False)
        t.setblocking(False)
    except BaseException:
        s.close()
        raise
    w = Link(t)
    w.raw = s
    return w, w


if core is not None:

    class Link(asyncio.StreamWriter):
        # a Stream that closes the socket under its TLS layer too, and says a failed
        # handshake with an OSError
        async def wait_closed(self):
            try:
                self.s.close()
            finally:
                self.raw.close()

        def write(self, b):
            try:
                asyncio.StreamWriter.write(self, b)
            except ValueError as e:
                raise OSError(-1, str(e))

        async def drain(self):
            try:
                return await asyncio.StreamWriter.drain(self)
            except ValueError as e:
                raise OSError(-1, str(e))

        async def readinto(self, b):
            try:
                return await asyncio.StreamWriter.readinto(self, b)
            except ValueError as e:
                raise OSError(-1, str(e))

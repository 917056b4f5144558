# The board's TLS identity from config.json, for MQTTClient(ssl=...): the broker's CA
# (tls_ca: the broker's certificate and host name are checked) and, with tls_cert and
# tls_key, the board's own certificate for mutual TLS. DER files on the board, written by
# `fleetwire deploy`. Loaded only by programs that use TLS.
#
# A failed handshake raises an exception that says why, by class (fleetwire.tls.errors,
# loaded here, small): the broker refused the board's certificate, or wanted one, or its
# own did not check out. mbedTLS only reports that the broker hung up, so the reason comes
# from what the board can check itself: fleetwire.tls.check, loaded for a refusal only.
try:
    import tls as ssl  # what the ssl module wraps (MicroPython 1.23+): its SSLContext, without the wrapper

    _TLS = True
except ImportError:
    import ssl

    _TLS = False


from .tls.errors import TLSError, HUNG_UP


def _read(path):
    with open(path, "rb") as f:
        return f.read()


class Context:
    """Context(cfg) -> an ssl.SSLContext stand-in: the client calls its wrap_socket().
    A file that is missing or unusable is raised at every connect (with the reason), so
    the program keeps running and its messages wait in the store until a deploy mends it."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.last = None  # the last handshake failure, classified (None after a handshake went through)
        self._bad = None  # (file key, error) when the identity could not be loaded
        self._ctx = None
        key = "tls_ca"
        try:
            if not cfg.get("tls_ca"):
                raise ValueError("none")
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ctx.verify_mode = ssl.CERT_REQUIRED
            ca = _read(cfg["tls_ca"])
            ctx.load_verify_locations(ca) if _TLS else ctx.load_verify_locations(cadata=ca)
            if cfg.get("tls_cert") or cfg.get("tls_key"):
                key = "tls_cert"
                cert = _read(cfg.get("tls_cert") or "")
                key = "tls_key"
                secret = _read(cfg.get("tls_key") or "")
                key = "tls_cert"
                ctx.load_cert_chain(cert, secret)  # MicroPython's: the bytes (CPython's wants PEM files)
                secret = None
            self._ctx = ctx
        except (OSError, ValueError, TypeError) as e:
            self._bad = (key, e)

    def wrap_socket(self, sock, server_hostname=None, **kw):
        # The client calls this with the TCP connection up; the handshake runs here. With
        # TLS 1.2 (all MicroPython's mbedTLS negotiates) the broker judges the board's
        # certificate within it, so a refusal is raised here, and classified.
        if self._bad is not None:
            self.last = explain(self._bad[1], self.cfg, self._bad[0])
            raise self.last
        try:
            s = self._ctx.wrap_socket(sock, server_hostname=server_hostname, **kw)
        except (OSError, ValueError) as e:
            self.last = explain(e, self.cfg)
            raise self.last
        self.last = None
        return s


def explain(e, cfg, key=None):
    """Why a handshake failed (or the identity file `key` would not load), as an exception of
    fleetwire.tls.errors; e itself when it is not about TLS. The judgement (fleetwire.tls.check)
    and then the text (fleetwire.tls.reasons) are loaded one after the other and dropped, so a
    board that connects holds neither; with no room for them the class still says what it can."""
    try:
        v = load("tls.check")
        v = v.unusable(key, e, cfg) if key else v.classify(e, cfg)
    except MemoryError:
        v = (
            (TLSError, key or "tls_refused", ())
            if key or isinstance(e, ValueError) or (e.args and e.args[0] in HUNG_UP)
            else e
        )
    drop("tls.check")
    if not isinstance(v, tuple):
        return v
    cls, k, values = v
    try:
        msg = getattr(load("tls.reasons"), k) % values
    except (MemoryError, AttributeError):
        msg = k
    drop("tls.reasons")
    return cls(msg)


def load(name):
    """fleetwire.<name>, imported now (for a moment: see drop)."""
    return __import__(__name__.rpartition(".")[0] + "." + name, None, None, ["_"])


def drop(name):
    """Forget fleetwire.<name>, so its memory goes with the next collection."""
    import sys

    pkg, _, name = (__name__.rpartition(".")[0] + "." + name).rpartition(".")
    sys.modules.pop(pkg + "." + name, None)
    try:  # the package holds its submodules too
        delattr(sys.modules[pkg], name)
    except (KeyError, AttributeError, TypeError):
        pass

# The board's TLS identity from config.json, for MQTTClient(ssl=...): the broker's CA
# (tls_ca: the broker's certificate and host name are checked) and, with tls_cert and
# tls_key, the board's own certificate for mutual TLS. DER files on the board, written by
# `fleetwire deploy`. Loaded only by programs that use TLS.
#
# A failed handshake raises an exception that says why, by class (fleetwire.tlserrors,
# loaded only then): the broker refused the board's certificate, or wanted one, or its own
# did not check out. mbedTLS only reports that the broker hung up, so the reason comes from
# what the board can check itself: see tlserrors.classify.
import ssl


def _read(path):
    with open(path, "rb") as f:
        return f.read()


class Context:
    """Context(cfg) -> an ssl.SSLContext stand-in: the client calls its wrap_socket().
    A file that is missing or unusable is raised at every connect (with the reason), so
    the program keeps running and its messages wait in the store until a deploy mends it."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.last = None     # the last handshake failure, classified
        self.fresh = False   # a handshake just succeeded: a hang-up before CONNACK is a refusal too
        self._bad = None     # (file key, error) when the identity could not be loaded
        self._ctx = None
        key = "tls_ca"
        try:
            if not cfg.get("tls_ca"):
                raise ValueError("none")
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ctx.verify_mode = ssl.CERT_REQUIRED
            ctx.load_verify_locations(cadata=_read(cfg["tls_ca"]))
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
        self.fresh = False
        if self._bad is not None:
            from .tlserrors import unusable
            self.last = unusable(self._bad[0], self._bad[1], self.cfg)
            raise self.last
        try:
            s = self._ctx.wrap_socket(sock, server_hostname=server_hostname, **kw)
        except (OSError, ValueError) as e:
            self.last = self.explain(e, True)
            raise self.last
        self.fresh = True
        self.last = None
        return s

    def explain(self, e, handshake=False):
        """The reason a connect failed, as an exception that names it (e itself when it is
        not about TLS)."""
        if handshake or self.fresh:
            from .tlserrors import classify
            return classify(e, self.cfg)
        return e

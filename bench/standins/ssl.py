# A stand-in for the ssl module on a unix port built without one (bench/renew_heap.py on the
# plain 32-bit build): a context that takes the files and holds nothing of them, so that what
# is counted is fleetwire's own. mbedTLS's copies of the certificates are bench/tls_heap.py's.
PROTOCOL_TLS_CLIENT = 2
CERT_REQUIRED = 2


class SSLContext:
    def __init__(self, protocol):
        self.verify_mode = 0

    def load_verify_locations(self, cadata=None):
        pass

    def load_cert_chain(self, cert, key):
        pass

    def wrap_socket(self, sock, server_hostname=None, **kw):
        raise OSError(95, "no TLS on this port")

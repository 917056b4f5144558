# Why a TLS connection to the broker failed, as an exception class a program can act on
# (`except CertificateRevoked:`). Only the classes: fleetwire.identity loads them with the
# board's identity, so a refusal can always be named even on a full heap; the judgement
# (fleetwire.tls.check) and the texts (fleetwire.tls.reasons) are loaded only for a refusal.


class TLSError(OSError):
    """The TLS connection to the broker failed; the class says why, the text what to do."""


class IdentityUnusable(TLSError):
    """A file of the board's identity (tls_ca, tls_cert, tls_key) is missing or unusable."""


class BrokerNotTrusted(TLSError):
    """The broker's certificate did not check out against tls_ca (CA, host name, dates)."""


class NoCertificate(TLSError):
    """The broker wants a client certificate and the board has none."""


class CertificateExpired(TLSError):
    """The board's certificate has expired (by the board's clock)."""


class CertificateNotYetValid(TLSError):
    """The board's certificate is not valid yet (by the board's clock)."""


class UnknownIssuer(TLSError):
    """The board's certificate is from a CA other than the one the broker trusts."""


class CertificateRevoked(TLSError):
    """The board's certificate is current and from the broker's CA, and still refused."""


# The broker hung up: EPIPE, ECONNRESET, ENOTCONN (Linux 107, lwIP 128), and mbedTLS's
# fatal alert, end of connection and close notify.
HUNG_UP = (32, 104, 107, 128, -0x7780, -0x7280, -0x7880)

# The texts of fleetwire.tls.check's exceptions, loaded only while one is being made and
# dropped after (tlscheck.say): a board that connects holds none of them. One name per
# error, its %s values from tlscheck.classify. Separate strings, not one table: a board
# refused while running has its heap in pieces, and small pieces still fit.

no_ca = (
    "config.json has tls_cert but no tls_ca: the board must check the broker's certificate before it "
    "shows its own; fleetwire deploy --ca DIR writes both"
)
missing = "config.json's %s (%s) is not on the board: fleetwire deploy --ca DIR writes the board's identity"
unset = (
    "config.json's %s is not set (tls_cert and tls_key go together): fleetwire deploy --ca DIR writes"
    " the board's identity"
)
unloadable = (
    "config.json's %s (%s) is not a %s the board can load (%s): fleetwire deploy --ca DIR writes the "
    "board's identity"
)
untrusted = (
    "the broker at %s presented a certificate the board does not trust: %s (checked against tls_ca "
    "%s); tls_ca must be the CA that signed the broker's certificate, and config.json's broker the "
    "name in that certificate"
)
clock = (
    "the broker at %s presented a certificate the board could not accept: %s (checked against tls_ca "
    "%s); the board's clock says %s, before its CA was made: set the clock (ntptime.settime()) before"
    " connecting"
)
no_cert = (
    "the broker at %s ended the TLS handshake and this board has no certificate to present "
    "(config.json has no tls_cert): the broker requires one; give the board its own: fleetwire deploy"
    " --ca DIR"
)
bad_cert = (
    "config.json's tls_cert %s cannot be read as a DER certificate: fleetwire deploy --ca DIR writes "
    "the board's identity"
)
expired = (
    "the broker at %s refused this board's certificate (CN %s, serial %s): it expired on %s (the "
    "board's clock: %s); a new one: fleetwire deploy --ca DIR"
)
early = (
    "the broker at %s refused this board's certificate (CN %s, serial %s): it is valid only from %s "
    "and the board's clock says %s; set the clock (NTP), or check the clock of the machine that "
    "issued it"
)
issuer = (
    "the broker at %s refused this board's certificate (CN %s, serial %s): it was issued by %s, not "
    "by the CA the broker trusts (%s, in %s); issue it from the fleet CA: fleetwire deploy --ca DIR "
    "--rotate"
)
revoked = (
    "the broker at %s refused this board's certificate (CN %s, serial %s), which is current and "
    "issued by %s: it has been revoked (fleetwire ca revoke); if the board is to come back, give it a"
    " new one: fleetwire deploy --ca DIR --rotate"
)
tls_refused = (
    "the broker ended the TLS handshake; the board had no room to judge why (its heap was full): "
    "see the broker's log"
)

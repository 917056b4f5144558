"""Fleet identity: the fleet CA and every certificate, a board's TLS files at deploy, and
the broker configuration that enforces them (mutual TLS, ACL, CRL); and, apart from them, the
release-signing keys that say who may put code on the fleet (signing.py)."""

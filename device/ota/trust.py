# fleetwire.ota.trust: is an offer (or a key update) signed by a key this board trusts, and may
# its release replace the one that runs? Loaded for an offer or a key update and dropped after
# the check (fleetwire.ota.agent.drop), before fleetwire.ota.ops takes a checked offer: the
# two are never loaded at once, and a board that is not being updated holds neither.
#
# A signed message is JSON: {"manifest": "<the manifest's JSON text>", "key": "<key id>",
# "sig": "<base64>"}, signed by fleetwire.host.identity.signing: RSA, PKCS#1 v1.5 with SHA-256 and
# e = 65537, over the manifest's text as it came (what is parsed is what was signed).
# MicroPython has no public-key primitive; checking this is one pow() of its big integers,
# s ** 65537 mod n, compared with the padded SHA-256 the signer must have signed (RFC 8017
# 8.2.2: the expected block is built and compared, never parsed).
#
# The keys the board trusts are in ota/keys.json: {"seq": n, "keys": {id: modulus, base64}},
# written by `fleetwire deploy --release-keys` and replaced only by a key update (op "keys")
# with a higher seq, signed by one of them. A board that holds no key takes the first key
# update signed by a key of its own set (trust on first use: such a board ran whatever the
# broker offered before).
# DigestInfo's DER head for SHA-256 (RFC 8017 9.2, note 1): the digest follows it
_HEAD = b"010\r\x06\t`\x86H\x01e\x03\x04\x02\x01\x05\x00\x04 "


class No(Exception):
    """A refusal: args are the code (fleetwire.ota.reasons) and its values."""


def opened(u, msg):
    """An offer as it came -> (its manifest, None) when a key this board holds signed it and it
    may replace the release that runs; else (the version it claims, (code, values...)). An
    offer signed by a key the board does not hold yet is kept (u.parked) for a key update."""
    u.parked = None  # the offer topic holds one offer: this one replaces what was kept
    v = None
    try:
        e, m = parse(msg)
        d = m if isinstance(m, dict) else {}
        v = d.get("version")
        op = d.get("op")
        try:
            check(u.states.load("keys"), e, ("the order back to %s" if op == "revert" else "release %s") % v)
        except No as x:
            if x.args[0] in ("key", "nokeys"):
                u.parked = msg
            raise
        run = u.st.get("version") or u.running
        if run and isinstance(v, str) and v != run and d.get("rollback") != run:
            # an order back names the release it replaces, and so does an older release offered
            # on purpose: a signed offer kept and sent again later is no way back
            if op == "revert" or older(v, str(run)):
                raise No("older", v, run, run)
        return m, None
    except No as x:
        return v, x.args


def parse(msg):
    """A message as it came -> (its envelope, the manifest it carries): parsed, not trusted
    yet. A bare manifest (unsigned) is both."""
    import json

    try:
        e = json.loads(msg)
        t = e.get("manifest") if isinstance(e, dict) else None
        return e, json.loads(t) if isinstance(t, str) else e
    except ValueError:
        raise No("manifest", "not JSON")


def check(keys, e, what):
    """No unless envelope `e` is signed by one of `keys` (a key set); `what` names the message
    in the reason."""
    t = e.get("manifest") if isinstance(e, dict) else None
    if not isinstance(t, str) or "sig" not in e:
        raise No("unsigned", what)
    have = (keys or {}).get("keys") or {}
    if not have:
        raise No("nokeys", what)
    k = e.get("key")
    n = have.get(k) if isinstance(k, str) else None
    if n is None:
        raise No("key", what, k, ", ".join(sorted(have)))
    if not good(n, e.pop("sig", None), t):  # (popped: its text is garbage once decoded)
        raise No("signature", what, k)


def good(n, sig, text):
    """Is `sig` (base64) the signature of `text` by the key of modulus `n` (base64)?"""
    import binascii
    import hashlib

    try:
        n = binascii.a2b_base64(n)
        s = binascii.a2b_base64(sig)
    except (ValueError, TypeError):
        return False
    k = len(n)
    if len(s) != k or k < 256:
        return False
    # each big number made from its bytes, which are garbage then: at pow(), the heap holds
    # only n, s and the expected block (pow() needs blocks of twice the key's length)
    n = int.from_bytes(n, "big")
    s = int.from_bytes(s, "big")
    em = bytearray(k)  # 00 01 FF..FF 00 DigestInfo SHA-256
    em[1] = 1
    for i in range(2, k - 52):
        em[i] = 255
    em[k - 51 : k - 32] = _HEAD
    em[k - 32 :] = hashlib.sha256(text.encode()).digest()
    em = int.from_bytes(em, "big")
    return s < n and pow(s, 65537, n) == em


def older(a, b):
    """Is release version `a` older than `b`? Their dotted numbers in order (1.10.0 is newer
    than 1.9.2), then a pre-release (2.0.0-rc1) before its release, and pre-releases by their
    tags' words and numbers (rc9 before rc10, beta.2 before beta.11); a word (dev) is older
    than any number."""
    return _order(a) < _order(b)


def _order(v):
    c = v.split("+")[0].split("-", 1)
    return [int(x) if x.isdigit() else -1 for x in c[0].split(".")], len(c) == 1, _tag(c[-1])


def _tag(t):
    # "rc10" -> [(1, 0, "rc"), (0, 10, "")]: runs of digits compared as numbers, not as text
    # ("rc10" < "rc9" as strings), and before words, as semantic versioning orders them
    out = []
    w = ""
    for ch in t + ".":
        if w and (ch == "." or ch.isdigit() != w[-1].isdigit()):
            out.append((0, int(w), "") if w.isdigit() else (1, 0, w))
            w = ""
        if ch != ".":
            w += ch
    return out


def update(u, msg):
    """A key update (fleet/<id>/ota/keys): the board's key set replaced by a newer one that a
    key it trusts signed. The set it holds again (the retained update, at each connect) is
    passed over; a refusal is logged and shown in vitals unless an update is under way; the
    board keeps its keys."""
    if not msg:
        return
    try:
        seq = _update(u, msg)
    except No as x:
        from .agent import DOWNLOADING, VERIFYING, APPLIED, REFUSED
        from .reasons import text

        why = text(*x.args)
        u.log("ota:", why)
        if u.state not in (DOWNLOADING, VERIFYING, APPLIED):
            u.show(REFUSED, None, x.args[0], why)
            u.tell()
        return
    if seq is not None:
        u.log("ota: release-signing keys updated to set %d" % seq)
        if u.parked is not None:
            u.held, u.parked = u.parked, None  # step() offers it again


def _update(u, msg):
    import binascii

    have = u.states.load("keys") or {}
    e, m = parse(msg)
    if not isinstance(m, dict) or m.get("op") != "keys":
        raise No("manifest", "a key update is {op: keys, seq, keys}")
    seq = m.get("seq")
    if not isinstance(seq, int) or not isinstance(m.get("keys"), dict):
        raise No("manifest", "a key update is {op: keys, seq, keys}")
    what = "key update %d" % seq
    mine = have.get("seq", 0)
    if seq == mine and have.get("keys"):
        return None
    if seq < mine:
        raise No("replay", what, mine)
    try:
        for n in m["keys"].values():
            if not 256 <= len(binascii.a2b_base64(n)) <= 512:
                raise ValueError
    except (ValueError, TypeError):
        raise No("manifest", "each key of a key update is an RSA modulus of 2048 to 4096 bits")
    if not m["keys"]:
        raise No("manifest", "a key update leaves the board at least one key")
    check(have if have.get("keys") else m, e, what)
    u.states.save("keys", {"seq": seq, "keys": m["keys"]})
    return seq

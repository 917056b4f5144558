# The rare steps of fleetwire.ota, loaded when one happens and dropped after (the updater
# keeps only its chunk path resident): taking an offer, checking and switching a finished
# download, confirming a release on trial, going back as ordered, and the refusals. An offer
# comes here checked by fleetwire.ota.trust (signed by a key the board trusts, not older than
# what runs unless it is a signed rollback naming that), which is dropped before this loads.
from .agent import DOWNLOADING, VERIFYING, APPLIED, CONFIRMED, ROLLED_BACK, REFUSED, FAILED, CANCELLED, HDR


class OTAError(Exception):
    """An update refused or failed; `code` is the vitals record's ota.code, the text says why."""

    def __init__(self, code, *values):
        from .reasons import text

        super().__init__(text(code, *values))
        self.code = code


class Refused(OTAError):
    """The offer is not for this board, or cannot fit: nothing was downloaded."""


class Failed(OTAError):
    """The download, its check or the switch failed: nothing was switched."""


def board_kind():
    """What a manifest's "board" must say here: the port (sys.platform: "esp32" on every
    ESP32); a virtual board, whose unix port emulates an ESP32, is "esp32" too. config.json's
    board_kind overrides it (fleetwire.ota.enable)."""
    import sys

    p = sys.platform
    if p == "linux":
        try:
            import esp32  # noqa: F401  (a virtual board's emulation)

            return "esp32"
        except ImportError:
            pass
    return p


def check(m, here):
    """A parsed manifest -> itself, or Refused naming what is wrong with it."""
    if not isinstance(m, dict):
        raise Refused("manifest", "not a JSON object")
    if m.get("v", 1) != 1:
        raise Refused("manifest", "format version %r (this board reads 1)" % m.get("v"))
    op = m.get("op", "install")
    if op == "revert":
        if not isinstance(m.get("version"), str):
            raise Refused("manifest", "a revert names the version to go back to")
        return m
    if op != "install":
        raise Refused("manifest", "unknown op %r" % op)
    for k, t in (
        ("version", str),
        ("kind", str),
        ("size", int),
        ("sha256", str),
        ("chunk", int),
        ("board", str),
    ):
        if not isinstance(m.get(k), t) or isinstance(m.get(k), bool):
            raise Refused("manifest", "%s missing or not a%s %s" % (k, "n" if t is int else "", t.__name__))
    if not 0 < len(m["version"]) < 32:
        raise Refused("manifest", "version must be 1 to 31 characters")
    if m["kind"] not in ("app", "firmware"):
        raise Refused("manifest", "kind %r (app or firmware)" % m["kind"])
    if m["size"] <= 0 or not 0 < m["chunk"] <= 65535:
        raise Refused("manifest", "size %r, chunk %r" % (m["size"], m["chunk"]))
    sha = m["sha256"]
    if len(sha) != 64 or any(c not in "0123456789abcdef" for c in sha):
        raise Refused("manifest", "sha256 must be 64 lowercase hex digits")
    if m["board"] != here:
        raise Refused("board", m["version"], m["board"], here)
    return m


def start(u):
    """The updater is made: what its boot state says to report, and leftovers to clear."""
    st = u.st
    old = u.states.load("dl")
    if old and old.get("m", {}).get("sha256") in (st.get("sha"), None):
        try:  # a download switched to already (a cut after the switch): its files go
            target(u, old["m"].get("kind", "app")).discard()
        except (OTAError, KeyError, TypeError, AttributeError):
            pass
        u.states.remove("dl")
    t = st.get("trial")
    last = st.get("last")
    if t:
        u.show(APPLIED, t.get("version"))
    elif last:
        rolled = last.get("state") != "confirmed"
        u.show(
            ROLLED_BACK if rolled else CONFIRMED,
            last.get("version"),
            "rolled" if rolled else None,
            last.get("reason"),
        )


def target(u, kind):
    t = u.targets.get(kind)
    if t is None:
        if kind == "app":
            from .app import AppTarget

            t = AppTarget()
        else:
            try:
                from .fw import FirmwareTarget

                t = FirmwareTarget()
            except (ImportError, OSError) as e:
                raise Refused("kind", "?", kind, "no OTA app partitions (%s)" % e)
        u.targets[kind] = t
    return t


def fail(u, state, e, version=None):
    """Drop the download; report why (nothing was switched)."""
    if u.target is not None:
        u.target.discard()
        u.target = None
    u.states.remove("dl")
    v = version or (u.m or {}).get("version")
    u.m = None
    u.tag = None
    u.verify_due = False
    u.log("ota:", e)
    u.show(state, v, getattr(e, "code", "io"), str(e))
    u.tell()


def offered(u, r):
    """An offer: empty (withdrawn), or what fleetwire.ota.trust.opened made of it (from
    Updater.step): (the manifest, None) signed and new enough, or (the version it claims, the
    refusal)."""
    version = None
    try:
        if not r:
            return withdrawn(u)
        m, why = r
        if why:
            version = m
            raise Refused(*why)
        version = m.get("version") if isinstance(m, dict) else None
        m = check(m, u.kind or board_kind())
        if m.get("op") == "revert":
            return revert(u, m)
        install(u, m)
    except OTAError as e:
        fail(u, REFUSED if isinstance(e, Refused) else FAILED, e, version)


def withdrawn(u):
    if u.m is not None and u.state in (DOWNLOADING, VERIFYING):
        v = u.m["version"]
        u.target.discard()
        u.target = None
        u.states.remove("dl")
        u.m = None
        u.tag = None
        u.show(CANCELLED, v)
        u.log("ota: release %s withdrawn" % v)
        u.tell()


def install(u, m):
    st = u.st
    running = st.get("version") or u.running
    if m["sha256"] == st.get("sha") or (not st.get("sha") and m["version"] == running):
        u.states.remove("dl")  # it runs already
        if u.state not in (CONFIRMED, ROLLED_BACK):
            u.show(CONFIRMED, m["version"])
            u.tell()
        return
    last = st.get("last") or {}
    if last.get("state") == "rolled_back" and last.get("sha") == m["sha256"] and not m.get("retry"):
        why = Refused("rolled", m["version"], last.get("reason"))
        u.show(ROLLED_BACK, m["version"], "rolled", str(why))
        return
    if u.m is not None and u.m["sha256"] == m["sha256"]:
        return  # the same offer again: the download goes on
    if u.target is not None:  # another release was on its way: it gives way
        u.target.discard()
        u.target = None
        u.m = None
        u.tag = None
    try:
        t = target(u, m["kind"])
    except Refused as e:
        raise Refused("kind", m["version"], m["kind"], str(e).rsplit(": ", 1)[-1])
    t.fits(m)
    room = u.max_packet - 5 - 2 - len(u.t_chunk) - 2 - HDR
    if room < 16:
        raise Refused("packet", u.max_packet, u.t_chunk.decode())
    u.chunk = min(m["chunk"], room)
    if u.buf is None or len(u.buf) != u.chunk:
        u.buf = None
        u.buf = bytearray(u.chunk)
    import binascii

    old = u.states.load("dl")
    resume = bool(old) and old.get("m", {}).get("sha256") == m["sha256"]
    if not resume:
        t.discard()
        u.states.save("dl", {"m": m, "verified": False})
    try:
        done = t.open(resume)
    except OSError as e:
        raise Failed("io", m["version"], e, "opening the download")
    if done > m["size"]:
        t.discard()
        done = t.open(False)
    u.m = m
    u.target = t
    u.tag = binascii.unhexlify(m["sha256"][:16])
    u.show(DOWNLOADING, m["version"])
    u.size = m["size"]
    u.done = done
    u.log(
        "ota: release %s (%s, %d bytes) %s at %d"
        % (m["version"], m["kind"], m["size"], "resumes" if done else "starts", done)
    )
    if (resume and old.get("verified")) or done == m["size"]:
        u.verify_due = True
    else:
        u.ask()
    u.tell()


def short(u, o, n):
    m = u.m
    if n == 0:
        fail(u, FAILED, Failed("truncated", m["version"], o, m["size"]))
    else:
        fail(u, FAILED, Failed("past_end", m["version"], o + n, m["size"]))


def io(u, e, o):
    fail(u, FAILED, Failed("io", u.m["version"], e, "writing at %d" % o))


def finish(u):
    """The whole image is on flash: its SHA-256 read back, then the switch and a restart."""
    m = u.m
    u.target.close()
    u.state = VERIFYING
    u.tell()
    import binascii
    import hashlib

    h = hashlib.sha256()
    buf = u.buf
    pos = 0
    size = m["size"]
    try:
        with u.target.reader() as f:
            while pos < size:
                k = size - pos
                n = f.readinto(buf) if k >= len(buf) else f.readinto(memoryview(buf)[:k])
                if not n:
                    break
                h.update(buf if n == len(buf) else memoryview(buf)[:n])
                pos += n
    except OSError as e:
        return fail(u, FAILED, Failed("io", m["version"], e, "reading back at %d" % pos))
    got = binascii.hexlify(h.digest()).decode()
    if got != m["sha256"]:
        return fail(u, FAILED, Failed("sha256", m["version"], pos, got[:12], m["sha256"][:12]))
    u.states.save("dl", {"m": m, "verified": True})
    st = u.st
    if not st.get("version"):
        st["version"] = u.running  # the deployed app's release, for a rollback to it

    def save():
        u.states.save("boot", st)

    try:
        u.target.apply(m, st, buf, save)
    except OTAError as e:
        return fail(u, FAILED, e)
    except OSError as e:
        return fail(u, FAILED, Failed("io", m["version"], e, "switching"))
    u.target.discard()
    u.states.remove("dl")
    u.target = None
    u.log("ota: release %s switched; restarting into it" % m["version"])
    u.show(APPLIED, m["version"])
    u.tell()
    restart(u)


def restart(u):
    if u.restart is not None:
        return u.restart()
    from .. import board

    board.reset()


def confirm(u):
    """The release on trial connected and its first vitals record was acknowledged."""
    st = u.st
    t = st["trial"]
    if t.get("kind") == "firmware":
        from .fw import confirm as fw_confirm

        fw_confirm()
    st["trial"] = None
    if t.get("revert"):  # back on the release before, as ordered: that is what to report
        st["last"] = {
            "state": "rolled_back",
            "version": t["revert"],
            "sha": None,
            "reason": "the operator ordered a rollback to %s" % t.get("version"),
        }
    else:
        st["last"] = {"state": "confirmed", "version": t.get("version"), "sha": t.get("sha")}
    u.states.save("boot", st)
    last = st["last"]
    u.log("ota: release %s confirmed" % t.get("version"))
    if last["state"] == "confirmed":
        u.show(CONFIRMED, last["version"])
    else:
        u.show(ROLLED_BACK, last["version"], "ordered", last["reason"])
    u.tell()


def revert(u, m):
    """Back to the release the last update replaced, as the operator ordered."""
    st = u.st
    p = st.get("prev") or {}
    if m["version"] == (st.get("version") or u.running):
        return
    if p.get("version") != m["version"]:
        raise Refused("revert", m["version"], p.get("version"))
    gone = st.get("version")
    t = target(u, p.get("kind", "app"))
    if u.target is not None:
        u.target.discard()
        u.target = None
        u.m = None
        u.tag = None
    u.states.remove("dl")

    def save():
        u.states.save("boot", st)

    t.revert(st, save)
    reason = "the operator ordered a rollback to %s" % m["version"]
    if not st.get("trial"):
        st["last"] = {"state": "rolled_back", "version": gone, "sha": None, "reason": reason}
        save()
    u.show(ROLLED_BACK, gone, "ordered", reason)
    u.log("ota: back to %s, as ordered" % m["version"])
    u.tell()
    u.restart_due = True  # from step(): not inside the client's callback

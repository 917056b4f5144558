# The app bootstrap of fleetwire.ota, run by main.py at every boot before anything else:
# which app runs (the deployed one in /lib, or an app bundle in ota/a or ota/b) and the
# trial of a new release. It is always the deployed copy (/lib, or frozen firmware) that
# runs this, never a bundle's, so a broken bundle cannot break the way back.
#
# ota/boot.json, replaced atomically (write, rename), is the whole truth:
#   app      the bundle slot that runs ("a", "b"), null for the deployed app
#   version  the release that runs (null: config.json's fw_version); sha: its SHA-256
#   prev     what the last update replaced ({kind, app, version, sha, label}), for a rollback
#   trial    a new release on probation ({kind, version, sha, boots, label, set, why}),
#            until it connects and its first vitals record is acknowledged (fleetwire.ota)
#   last     the outcome to report ({state: confirmed | rolled_back, version, sha, reason})
# A new app bundle boots once on trial: if the board starts again before it confirmed
# (a crash, a reset, a power cut, the confirmation deadline), the previous app comes
# back. A new firmware image is rolled back by ESP-IDF's bootloader; this only notices
# it (the running partition is not the one staged) and reports it.
import sys

from .ota.state import SLOTS, STATE, load, running_label, save, slot_dir


def _whole(slot):
    # a bundle slot is whole once its marker is written, after every file of it
    import os

    try:
        os.stat(slot_dir(slot) + "/.done")
        return True
    except OSError:
        return False


def roll_back(st, why):
    """Back to what the trial replaced; `last` says which release went and why."""
    t = st.get("trial") or {}
    p = st.get("prev") or {}
    st["last"] = {"state": "rolled_back", "version": t.get("version"), "sha": t.get("sha"), "reason": why}
    st["app"] = p.get("app")
    st["version"] = p.get("version")
    st["sha"] = p.get("sha")
    st["prev"] = None
    st["trial"] = None


def advance(st, label=None):
    """A boot's step of the trial in `st` (the boot state): count the boot, or end the trial
    in a rollback. `label`: the app partition that booted (firmware trials). -> whether st
    changed (and must be saved before the app runs)."""
    t = st.get("trial")
    if not t:
        return False
    if t.get("kind") == "firmware":
        if label != t.get("label"):
            if t.get("set"):  # set_boot() took, yet the old image runs: the bootloader went back
                roll_back(st, t.get("why") or "the new firmware reset before it confirmed")
            else:  # cut before set_boot(): nothing switched; fleetwire.ota applies it again
                p = st.get("prev") or {}
                st["version"], st["sha"], st["prev"], st["trial"] = p.get("version"), p.get("sha"), None, None
        else:
            t["set"] = True
            t["boots"] = t.get("boots", 0) + 1
    else:
        t["boots"] = t.get("boots", 0) + 1
        if t["boots"] > 1:
            roll_back(
                st,
                t.get("why")
                or "the new app reset before it confirmed (a crash, or a reset during its trial)",
            )
    return True


def select(path=STATE):
    """At boot: advance the trial (or end it in a rollback), save, and put the app's
    folders on sys.path -> the state, or None when no update was ever applied."""
    st = load(path)
    if st is None:
        return None
    t = st.get("trial")
    if advance(st, running_label() if t and t.get("kind") == "firmware" else None):
        save(st, path)
    slot = st.get("app")
    if slot in SLOTS and not _whole(slot):  # cannot happen through fleetwire.ota; never run half an app
        roll_back(st, "bundle slot %s is incomplete" % slot)
        save(st, path)
        slot = st.get("app")
    if slot in SLOTS:
        use(slot)
    t = st.get("trial")
    if t:
        print("ota: %s %s on trial" % (t.get("kind"), t.get("version")))
    return st


def use(slot):
    """The bundle's folders in place of the board's own ("" and /lib): its modules, then
    frozen ones, then its lib. The working directory (config, store, state) stays /."""
    d = slot_dir(slot)
    p = sys.path
    for i in range(len(p)):
        if p[i] == "":
            p[i] = d
        elif p[i] in ("/lib", "lib"):
            p[i] = d + "/lib"
    # the deployed fleetwire that boot.py loaded must not serve the bundle's imports
    for k in list(sys.modules):
        if k == "fleetwire" or k.startswith("fleetwire.") or k == "app":
            del sys.modules[k]


def expire(why, path=STATE):
    """The trial ran out (the deadline passed, or the new release failed): note why, and
    reset; the next boot goes back."""
    st = load(path)
    if st and st.get("trial"):
        st["trial"]["why"] = why
        save(st, path)
    print("ota:", why, "- resetting; the previous release comes back")
    reset()


def reset():
    try:
        import machine

        machine.reset()
    except ImportError:
        pass
    raise SystemExit("reset")


def failed(e):
    """The release on trial raised out of the app: note why and reset (the next boot goes back)."""
    if hasattr(sys, "print_exception"):
        sys.print_exception(e)
    st = load()
    t = (st or {}).get("trial") or {}
    expire("the new %s failed: %s: %s" % (t.get("kind", "release"), type(e).__name__, e))

# The records of fleetwire.ota on flash, each a small JSON file replaced atomically (write,
# rename): ota/boot.json, the boot state (which app and release run, a trial, what to
# report; see fleetwire.otaboot), ota/dl.json, the download under way, and ota/keys.json,
# the release-signing keys the board trusts.
STATE = "ota/boot.json"
DL = "ota/dl.json"
KEYS = "ota/keys.json"  # the release-signing keys the board trusts (fleetwire.ota.trust)
SLOTS = ("a", "b")  # the app bundle slots, ota/a and ota/b


def slot_dir(slot):
    return "ota/" + slot


def running_label():
    """The label of the app partition that booted (esp32), or None without one."""
    try:
        import esp32

        return esp32.Partition(esp32.Partition.RUNNING).info()[4]
    except (ImportError, OSError, AttributeError):
        return None


def load(path=STATE):
    import json

    try:
        with open(path) as f:
            st = json.load(f)
        return st if isinstance(st, dict) else None
    except (OSError, ValueError):
        return None


def save(st, path=STATE):
    import json
    import os

    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(st, f)
    os.rename(tmp, path)  # the one step that switches: the old file or the new, never a mix


class FileStates:
    """fleetwire.ota's records by key: "boot" (ota/boot.json), "dl" (ota/dl.json) and "keys"
    (ota/keys.json). A
    simulated device keeps them in RAM instead (fleetwire.host.fleet.sim)."""

    PATHS = {"boot": STATE, "dl": DL, "keys": KEYS}

    def load(self, key):
        return load(self.PATHS[key])

    def save(self, key, d):
        import os

        try:
            os.mkdir("ota")
        except OSError:
            pass
        save(d, self.PATHS[key])

    def remove(self, key):
        import os

        try:
            os.remove(self.PATHS[key])
        except OSError:
            pass

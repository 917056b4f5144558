"""Deploy fleetwire to a board (real or virtual) with mpremote: build the board tree,
copy only the files whose SHA-256 differs from the board's, write config.json, and
reset the board. Credentials go into config.json and are never printed.
"""
import hashlib
import json
import os
import subprocess
import sys
import tempfile

from fleetwire.host import build

FIRMWARE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "firmware")
TEMPLATES = ("boot.py", "main.py")
SECRET_KEYS = ("password", "wifi_password", "mqtt_password", "key")

# Runs on the board: the SHA-256 of each path listed, or "-" when it is missing.
_HASHES = """
import hashlib, binascii
def _h(p):
    try:
        f = open(p, "rb")
    except OSError:
        return "-"
    h = hashlib.sha256()
    b = bytearray(512)
    while True:
        n = f.readinto(b)
        if not n:
            break
        h.update(b[:n])
    f.close()
    return binascii.hexlify(h.digest()).decode()
for _p in %r:
    print(_p, _h(_p))
"""

_MKDIRS = """
import os
for _d in %r:
    try:
        os.mkdir(_d)
    except OSError:
        pass
"""


class DeployError(Exception):
    pass


def _mpremote(port, *args, timeout=120, retries=0):
    try:
        r = subprocess.run([sys.executable, "-m", "mpremote", "connect", port, "resume"] + list(args),
                           capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        if retries:  # a board caught mid-restart can miss the first Ctrl-C: once more
            return _mpremote(port, *args, timeout=timeout, retries=retries - 1)
        raise DeployError("the board on %s did not answer within %d s" % (port, timeout))
    if r.returncode:
        err = (r.stderr or r.stdout).strip().splitlines()
        raise DeployError("mpremote on %s failed: %s" % (port, err[-1] if err else "exit %d" % r.returncode))
    return r.stdout


def _sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def check_port(port):
    if port.startswith(("/dev/", ".", "/")) and not os.path.exists(port):
        raise DeployError("no such serial port: %s" % port)


def load_config(path):
    """The device's config.json content from a JSON file; checked for what a device needs."""
    try:
        with open(path) as f:
            cfg = json.load(f)
    except OSError as e:
        raise DeployError("cannot read config %s: %s" % (path, e.strerror))
    except ValueError as e:
        raise DeployError("config %s is not JSON: %s" % (path, e))
    missing = [k for k in ("device_id", "broker") if not cfg.get(k)]
    if missing:
        raise DeployError("config %s lacks %s" % (path, ", ".join(missing)))
    if cfg.get("mqtt_password") and not cfg.get("mqtt_user"):
        # the board's client would refuse it at every boot (MQTT-3.1.2-22)
        raise DeployError("config %s has mqtt_password but no mqtt_user: MQTT 3.1.1 sends a password "
                          "only with a user name" % path)
    return cfg


def redact(cfg):
    return {k: ("(set)" if any(s in k for s in SECRET_KEYS) and v else v) for k, v in cfg.items()}


def deploy(port, config=None, mpy=False, arch=None, reset=True, log=print):
    """Bring the board on `port` up to date -> {"copied": [...], "unchanged": n, "config": ...}."""
    check_port(port)
    with tempfile.TemporaryDirectory(prefix="fleetwire-deploy-") as out:
        build.build(out, mpy=mpy, arch=arch)
        files = {}  # board path -> local path
        for dirpath, _, names in os.walk(os.path.join(out, "lib")):
            for n in names:
                local = os.path.join(dirpath, n)
                files[os.path.relpath(local, out).replace(os.sep, "/")] = local
        for t in TEMPLATES:
            files[t] = os.path.join(FIRMWARE, t)
        if config is not None:
            cfg_path = os.path.join(out, "config.json")
            with open(cfg_path, "w") as f:
                json.dump(config, f, indent=1, sort_keys=True)
            files["config.json"] = cfg_path
        remote = {}
        for line in _mpremote(port, "exec", _HASHES % sorted(files), timeout=30, retries=1).splitlines():
            p, _, h = line.strip().rpartition(" ")
            remote[p] = h
        changed = sorted(p for p in files if remote.get(p) != _sha(files[p]))
        if changed:
            dirs = sorted({"/".join(p.split("/")[:i]) for p in changed for i in range(1, p.count("/") + 1)})
            args = ["exec", _MKDIRS % dirs]
            for p in changed:
                args += ["+", "fs", "cp", files[p], ":" + p]
            _mpremote(port, *args)
    res = {"copied": changed, "unchanged": len(files) - len(changed),
           "config": ("written" if "config.json" in changed else "unchanged") if config is not None else "not given"}
    for p in changed:
        log("  copied %s" % p)
    log("%d copied, %d unchanged%s" % (len(changed), res["unchanged"],
                                       "; config.json %s: %s" % (res["config"], json.dumps(redact(config)))
                                       if config is not None else ""))
    if reset:
        # even with nothing copied: checking the board interrupted its program (mpremote
        # stops it to reach the REPL), and a reset is what starts main.py again
        _mpremote(port, "reset", timeout=20)  # machine.reset(), not waiting for an answer
        log("reset the board")
    return res

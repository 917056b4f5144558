"""Deploy fleetwire to a board (real or virtual) with mpremote: build the board tree,
copy only the files whose SHA-256 differs from the board's, write the board's TLS
identity (fleetwire.host.identity.provision: with a fleet CA, a key and certificate of its own),
write the release-signing public keys the board trusts (ota/keys.json), write config.json,
and reset the board. Credentials and keys are never printed.
"""

import hashlib
import json
import os
import subprocess
import sys
import tempfile

from fleetwire import firmware
from fleetwire.host.rig import build

from fleetwire.host.identity import pki, provision

FIRMWARE = firmware.PATH  # boot.py and main.py, as deploy copies them
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


KEYS = "ota/keys.json"  # the release-signing keys the board trusts (fleetwire.ota.trust)


def _release_keys(config, directory):
    """The release keys to give the board (fleetwire.host.identity.signing.ReleaseKeys), or None."""
    if not directory:
        if config is not None and config.get("ota"):
            raise DeployError(
                'a board with "ota": true takes only releases signed by a key it holds: give the '
                "fleet's release-signing keys with --release-keys DIR (fleetwire release init makes them)"
            )
        return None
    from fleetwire.host.identity.signing import ReleaseKeys, SigningError

    try:
        return ReleaseKeys(directory)
    except SigningError as e:
        raise DeployError(str(e))


def _mpremote(port, *args, timeout=120, retries=0):
    try:
        r = subprocess.run(
            [sys.executable, "-m", "mpremote", "connect", port, "resume"] + list(args),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
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
        raise DeployError(
            "config %s has mqtt_password but no mqtt_user: MQTT 3.1.1 sends a password "
            "only with a user name" % path
        )
    return cfg


def redact(cfg):
    return {k: ("(set)" if any(s in k for s in SECRET_KEYS) and v else v) for k, v in cfg.items()}


def deploy(
    port,
    config=None,
    mpy=False,
    arch=None,
    reset=True,
    log=print,
    ca=None,
    cert=None,
    key=None,
    broker_ca=None,
    rotate=False,
    release_keys=None,
):
    """Bring the board on `port` up to date -> {"copied": [...], "unchanged": n, "config": ...,
    "identity": "issued" | "kept" | "installed" | None}.

    ca (a fleet CA directory) gives the board a key and certificate of its own (kept on later
    deploys unless rotate); cert/key install ones issued elsewhere; broker_ca is the CA of the
    broker's certificate (default: the fleet CA). release_keys (a release-key directory,
    `fleetwire release init`) gives the board the public keys a release must be signed by
    (ota/keys.json); a config with "ota": true needs them. All of it is checked before the
    board is touched (DeployError)."""
    keys = _release_keys(config, release_keys)
    plan = None
    if ca or cert or key or broker_ca or rotate:
        if config is None:
            raise DeployError(
                "a TLS identity needs the board's config (--config): its device_id names the certificate"
            )
        try:
            plan = provision.prepare(config, ca, cert, key, broker_ca, rotate)
        except pki.PKIError as e:
            raise DeployError(str(e))
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
        if keys is not None:
            files[KEYS] = os.path.join(out, "keys.json")
            with open(files[KEYS], "wb") as f:
                f.write(keys.board_file())
        asked = set(files) | {"config.json"}
        if plan is not None:
            asked |= {provision.CA, provision.ISSUER}
        query = _HASHES % sorted(asked) + (provision.BOARD_QUERY if plan is not None else "")
        answer = _mpremote(port, "exec", query, timeout=30, retries=1).splitlines()
        remote = {}
        for line in answer:
            p, _, h = line.strip().rpartition(" ")
            remote[p] = h
        new = {}  # written whatever the board holds: a new certificate and its key
        if plan is not None:
            try:
                plan.decide(*provision.parse_query(answer))
            except pki.PKIError as e:
                raise DeployError(str(e))
            ident = os.path.join(out, "identity")
            os.mkdir(ident, 0o700)
            for p, local in plan.files(ident).items():
                (new if p in (provision.CERT, provision.KEY) else files)[p] = local
            config = plan.config(config)
        if config is not None:
            cfg_path = os.path.join(out, "config.json")
            with open(cfg_path, "w") as f:
                json.dump(config, f, indent=1, sort_keys=True)
            files["config.json"] = cfg_path
        changed = sorted(p for p in files if remote.get(p) != _sha(files[p]))
        # the identity before config.json, which names it; config.json last of all
        order = (
            [p for p in changed if p != "config.json"]
            + sorted(new)
            + (["config.json"] if "config.json" in changed else [])
        )
        changed = sorted(changed + sorted(new))
        if changed:
            dirs = sorted({"/".join(p.split("/")[:i]) for p in changed for i in range(1, p.count("/") + 1)})
            args = ["exec", _MKDIRS % dirs]
            for p in order:
                args += ["+", "fs", "cp", files.get(p) or new[p], ":" + p]
            _mpremote(port, *args)
    held = 2 if plan is not None and plan.action == "kept" else 0  # the board's certificate and key
    res = {
        "copied": changed,
        "unchanged": len(files) - len(changed) + len(new) + held,
        "config": ("written" if "config.json" in changed else "unchanged")
        if config is not None
        else "not given",
        "identity": plan.action if plan else None,
    }
    for p in changed:
        log("  copied %s" % p)
    if keys is not None:
        log(
            "release keys: the board trusts key set %d (%s)%s"
            % (keys.seq, ", ".join(keys.ids), "" if KEYS in changed else ", as it did")
        )
    if plan is not None:
        revoked = plan.commit()
        log("identity: %s" % plan.describe())
        if revoked:
            log(
                "identity: revoked the certificate it replaced (serial %s); "
                "reload the broker so it reads the new "
                "CRL (%s)" % (revoked, plan.ca.crl_path)
            )
    log(
        "%d copied, %d unchanged%s"
        % (
            len(changed),
            res["unchanged"],
            "; config.json %s: %s" % (res["config"], json.dumps(redact(config)))
            if config is not None
            else "",
        )
    )
    if reset:
        # even with nothing copied: checking the board interrupted its program (mpremote
        # stops it to reach the REPL), and a reset is what starts main.py again
        _mpremote(port, "reset", timeout=20)  # machine.reset(), not waiting for an answer
        log("reset the board")
    return res

"""Release-signing keys: the operator signs what a board is offered (a release's manifest, an
order back, a key update), and the board checks it with the public keys it holds
(fleetwire.ota.trust). Apart from the fleet CA (fleetwire.host.identity.pki): that one says who
may join the fleet, this one who may put code on it; they need not live on the same machine.

The scheme is RSA (3072-bit keys, e = 65537) with PKCS#1 v1.5 and SHA-256: a board has
`hashlib.sha256` and a big-integer `pow`, and no public-key primitive, and checking such a
signature is one modular exponentiation with a 17-bit exponent (Ed25519 needs SHA-512, which
stock ESP32 firmware lacks; ECDSA needs a point multiplication in Python).

A signed message (what fleet/<id>/ota/offer and fleet/<id>/ota/keys carry) is JSON:
    {"manifest": "<the manifest's JSON text>", "key": "<key id>", "sig": "<base64>"}
The signature is over the manifest's text, byte for byte, so the board checks what it
parses. A key id is the first 8 bytes of the SHA-256 of the key's modulus (big-endian), in hex.

A key directory (`fleetwire release init`; $FLEETWIRE_RELEASE, else ~/.fleetwire/release):
    keys.json   public: {"seq", "keys": {id: modulus in base64}, "signing": id, "retired": [ids]}
                -- "seq" and "keys" are the key set a board holds (ota/keys.json)
    ID.key      each private key (PEM, mode 600): never printed, never copied anywhere
    update.json the newest key update, signed, as `fleetwire release publish` sends it
A key update carries the whole key set, numbered: {"v": 1, "op": "keys", "seq", "keys"}; a
board takes it only when a key it trusts signed it and its seq is higher than its own.
Rotation: `rotate` adds a new key (the set holds both; the new one signs from then on), the
update signed by the key boards certainly hold; `retire` drops the old one, its update signed
by the retiring key, so that a board that missed the first update takes the second."""

import base64
import hashlib
import json
import os

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from fleetwire.host.identity.pki import write_private, write_public

BITS = 3072
E = 65537  # the only exponent a board takes (fleetwire.ota.trust)
SIZES = (2048, 3072, 4096)  # the key sizes a board takes


class SigningError(ValueError):
    """Release-signing keys that cannot be used, and why (a person can act on the text)."""


def default_dir():
    """The operator's release-key directory: $FLEETWIRE_RELEASE, else ~/.fleetwire/release."""
    return os.environ.get("FLEETWIRE_RELEASE") or os.path.join(
        os.path.expanduser("~"), ".fleetwire", "release"
    )


def modulus(public_key):
    """The key's modulus, big-endian, in as many bytes as the key is long."""
    n = public_key.public_numbers().n
    return n.to_bytes((n.bit_length() + 7) // 8, "big")


def key_id(public_key):
    return hashlib.sha256(modulus(public_key)).hexdigest()[:16]


def public_b64(public_key):
    return base64.b64encode(modulus(public_key)).decode()


def public_from_b64(text):
    """A key set's entry -> an RSA public key (e = 65537)."""
    n = int.from_bytes(base64.b64decode(text), "big")
    return rsa.RSAPublicNumbers(E, n).public_key()


class Signer:
    """Signer(private_key): sign(manifest dict) -> the signed message's bytes."""

    def __init__(self, private_key):
        self.key = private_key
        self.id = key_id(private_key.public_key())

    def sign(self, manifest):
        text = json.dumps(manifest, separators=(",", ":"))
        sig = self.key.sign(text.encode(), padding.PKCS1v15(), hashes.SHA256())
        env = {"manifest": text, "key": self.id, "sig": base64.b64encode(sig).decode()}
        return json.dumps(env, separators=(",", ":")).encode()

    def __repr__(self):
        return "Signer(%s)" % self.id


def new_key(bits=BITS):
    return rsa.generate_private_key(public_exponent=E, key_size=bits)


def opened(message, key_set):
    """A signed message and a key set ({"keys": {id: b64}}) -> the manifest (dict) it signs;
    SigningError if it is not signed by one of the set's keys. The host's check, with the
    `cryptography` package (the board's is fleetwire.ota.trust)."""
    try:
        env = json.loads(message)
        text, kid, sig = env["manifest"], env["key"], base64.b64decode(env["sig"])
    except (ValueError, KeyError, TypeError) as e:
        raise SigningError("not a signed message (%s)" % e)
    b64 = (key_set or {}).get("keys", {}).get(kid)
    if b64 is None:
        raise SigningError("signed by key %s, which is not in the key set" % kid)
    try:
        public_from_b64(b64).verify(sig, text.encode(), padding.PKCS1v15(), hashes.SHA256())
    except InvalidSignature:
        raise SigningError("the signature by key %s does not match its manifest" % kid)
    return json.loads(text)


class ReleaseKeys:
    """ReleaseKeys(directory): the operator's release-signing keys, made by
    ReleaseKeys.create() (`fleetwire release init`)."""

    def __init__(self, directory):
        self.dir = os.path.abspath(directory)
        self.path = os.path.join(self.dir, "keys.json")
        self.update_path = os.path.join(self.dir, "update.json")
        try:
            with open(self.path) as f:
                self.state = json.load(f)
            if not all(k in self.state for k in ("seq", "keys", "signing")):
                raise ValueError("incomplete")
        except FileNotFoundError:
            raise SigningError(
                "no release-signing keys in %s: make them with `fleetwire release init --dir %s`"
                % (self.dir, self.dir)
            )
        except (ValueError, KeyError, TypeError):
            raise SigningError("%s is damaged (not the JSON fleetwire release writes)" % self.path)

    @classmethod
    def create(cls, directory, bits=BITS, force=False):
        d = os.path.abspath(directory)
        if os.path.exists(os.path.join(d, "keys.json")) and not force:
            raise SigningError(
                "%s already holds release-signing keys; every board trusts them. `fleetwire release "
                "rotate` replaces a key without a visit; --force starts over (every board then needs "
                "`fleetwire deploy --release-keys`)" % d
            )
        if bits not in SIZES:
            raise SigningError(
                "a release-signing key is %s bits, not %d" % (" or ".join(map(str, SIZES)), bits)
            )
        os.makedirs(d, mode=0o700, exist_ok=True)
        key = new_key(bits)
        kid = key_id(key.public_key())
        _write_key(d, kid, key)
        state = {"seq": 1, "keys": {kid: public_b64(key.public_key())}, "signing": kid, "retired": []}
        write_public(os.path.join(d, "keys.json"), _json(state))
        rk = cls(d)
        rk._publish_update(kid)  # the first key set, for a board that holds none yet
        return rk

    # ---- what is in it

    @property
    def seq(self):
        return self.state["seq"]

    @property
    def ids(self):
        return sorted(self.state["keys"])

    @property
    def signing_id(self):
        return self.state["signing"]

    def key_set(self):
        """What a board holds (ota/keys.json): {"seq", "keys"}."""
        return {"seq": self.seq, "keys": dict(self.state["keys"])}

    def board_file(self):
        return json.dumps(self.key_set(), separators=(",", ":"), sort_keys=True).encode()

    def private(self, kid):
        path = os.path.join(self.dir, kid + ".key")
        try:
            with open(path, "rb") as f:
                return serialization.load_pem_private_key(f.read(), None)
        except FileNotFoundError:
            raise SigningError("release-signing key %s is not in %s (%s.key)" % (kid, self.dir, kid))
        except ValueError:
            raise SigningError("%s is not a private key this tool wrote" % path)

    def signer(self, kid=None):
        """The Signer of the key that signs releases now (or of key `kid`)."""
        return Signer(self.private(kid or self.signing_id))

    def update(self):
        """The newest key update, signed (what `fleetwire release publish` sends)."""
        try:
            with open(self.update_path, "rb") as f:
                return f.read()
        except FileNotFoundError:
            raise SigningError(
                "%s has no key update (update.json); `fleetwire release init` makes one" % self.dir
            )

    # ---- changing the key set

    def rotate(self, bits=BITS):
        """A new key joins the set and signs from now on -> its id. The key update is signed by
        the key that signed until now (every board that holds the set holds it)."""
        old = self.signing_id
        key = new_key(bits)
        kid = key_id(key.public_key())
        _write_key(self.dir, kid, key)
        self.state["keys"][kid] = public_b64(key.public_key())
        self.state["signing"] = kid
        self.state["seq"] += 1
        self._save()
        self._publish_update(old)
        return kid

    def retire(self, kid=None):
        """Drop key `kid` (default: every key but the signing one) from the set -> the ids
        retired. The key update is signed by a retiring key, so a board that missed the update
        that brought the new key still takes this one."""
        gone = [kid] if kid else [k for k in self.ids if k != self.signing_id]
        if not gone:
            raise SigningError("no key to retire: the set holds only the signing key %s" % self.signing_id)
        for k in gone:
            if k not in self.state["keys"]:
                raise SigningError("key %s is not in the set (%s)" % (k, ", ".join(self.ids)))
            if k == self.signing_id:
                raise SigningError(
                    "key %s signs releases now: `fleetwire release rotate` first, then retire it" % k
                )
        signer = next(
            (k for k in gone if os.path.exists(os.path.join(self.dir, k + ".key"))), self.signing_id
        )
        for k in gone:
            del self.state["keys"][k]
            self.state["retired"] = self.state.get("retired", []) + [k]
        self.state["seq"] += 1
        self._save()
        self._publish_update(signer)
        return gone

    def _save(self):
        write_public(self.path, _json(self.state))

    def _publish_update(self, signer_id):
        m = {"v": 1, "op": "keys", "seq": self.seq, "keys": dict(self.state["keys"])}
        write_public(self.update_path, self.signer(signer_id).sign(m))


def _write_key(d, kid, key):
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    write_private(os.path.join(d, kid + ".key"), pem)


def _json(d):
    return (json.dumps(d, indent=1, sort_keys=True) + "\n").encode()

"""Deploy fleetwire to a board over its serial port (mpremote): build the board tree,
copy only what changed (SHA-256 against the board's files), add boot.py and main.py
(templates in firmware/), write config.json (device id, Wi-Fi, broker, TLS CA,
credentials -- which are never printed), then reset the board (also when nothing
changed: checking the board stopped its program), unless --no-reset. Works the same on a
virtual board (`fleetwire vboard`).

With --ca DIR (a fleet CA, `fleetwire ca init`) the board gets its own key and certificate
(CN = its device_id) and the broker's CA, in tls/ on the board, and connects with mutual
TLS. The key is made here, written to the board once and kept nowhere else; a later deploy
keeps both unless --rotate (or the certificate expires within 30 days, or is not this
device's or this CA's). --cert/--key install a certificate issued elsewhere (AWS IoT Core);
--broker-ca is the CA of the broker's certificate when it is not the fleet CA. Everything
is checked before the board is touched.

With --release-keys DIR (`fleetwire release init`) the board gets the public release-signing
keys (ota/keys.json): with "ota": true in its config it takes only releases they signed, and a
config with "ota": true needs them.

  fleetwire deploy --port /dev/ttyUSB0 --config device.json --mpy
  fleetwire deploy --port /dev/ttyUSB0 --config device.json --mpy --ca ~/.fleetwire/ca
  fleetwire deploy --port /dev/ttyUSB0 --config device.json --mpy --ca ~/.fleetwire/ca \\
      --release-keys ~/.fleetwire/release
  fleetwire deploy --port /dev/ttyUSB0 --config device.json --mpy --cert dev.pem.crt --key dev.private.key \\
      --broker-ca AmazonRootCA1.pem
"""

import sys


def add_arguments(p):
    p.add_argument("--port", required=True, help="the board's serial port (or a virtual board's pty)")
    p.add_argument(
        "--config",
        help="a JSON file: device_id, broker (required); port, wifi_ssid, wifi_password, "
        "mqtt_user, mqtt_password, tls_ca, fw_version, period_s",
    )
    p.add_argument("--mpy", action="store_true", help="compile to .mpy (needed on small heaps)")
    p.add_argument("--arch", help="mpy-cross architecture for native code, e.g. xtensawin")
    p.add_argument("--no-reset", action="store_true", help="do not reset the board afterwards")
    p.add_argument(
        "--ca", metavar="DIR", help="fleet CA directory: give the board a key and certificate of its own"
    )
    p.add_argument(
        "--rotate",
        action="store_true",
        help="with --ca: a new key and certificate even if the board's "
        "are still good (the old certificate is revoked)",
    )
    p.add_argument(
        "--cert", metavar="FILE", help="install this client certificate (PEM or DER), issued elsewhere"
    )
    p.add_argument("--key", metavar="FILE", help="its private key (PEM or DER, unencrypted)")
    p.add_argument(
        "--broker-ca", metavar="FILE", help="CA of the broker's certificate (default: the fleet CA)"
    )
    p.add_argument(
        "--release-keys",
        metavar="DIR",
        help="the fleet's release-signing keys (fleetwire release init): the public ones go to the board, "
        'which takes only releases they signed (needed with "ota": true)',
    )


def run(args):
    from fleetwire.host.rig.deploy import DeployError, deploy, load_config

    try:
        cfg = load_config(args.config) if args.config else None
        deploy(
            args.port,
            cfg,
            mpy=args.mpy or bool(args.arch),
            arch=args.arch,
            reset=not args.no_reset,
            log=lambda m: print(m, flush=True),
            ca=args.ca,
            cert=args.cert,
            key=args.key,
            broker_ca=args.broker_ca,
            rotate=args.rotate,
            release_keys=args.release_keys,
        )
    except DeployError as e:
        print("fleetwire deploy: %s" % e, file=sys.stderr)
        return 2
    return 0

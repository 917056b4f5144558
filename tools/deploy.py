"""Deploy fleetwire to a board over its serial port (mpremote): build the board tree,
copy only what changed (SHA-256 against the board's files), add boot.py and main.py
(templates in firmware/), write config.json (device id, Wi-Fi, broker, TLS CA,
credentials -- which are never printed), then reset the board (also when nothing
changed: checking the board stopped its program), unless --no-reset. Works the same on a
virtual board (`fleetwire vboard`).

  fleetwire deploy --port /dev/ttyUSB0 --config device.json --mpy
"""
import sys

HELP = "deploy fleetwire, boot.py/main.py and config.json to a board, copying only what changed"


def add_arguments(p):
    p.add_argument("--port", required=True, help="the board's serial port (or a virtual board's pty)")
    p.add_argument("--config", help="a JSON file: device_id, broker (required); port, wifi_ssid, wifi_password, "
                                    "mqtt_user, mqtt_password, tls_ca, fw_version, period_s")
    p.add_argument("--mpy", action="store_true", help="compile to .mpy (needed on small heaps)")
    p.add_argument("--arch", help="mpy-cross architecture for native code, e.g. xtensawin")
    p.add_argument("--no-reset", action="store_true", help="do not reset the board afterwards")


def run(args):
    from fleetwire.host.deploy import DeployError, deploy, load_config
    try:
        cfg = load_config(args.config) if args.config else None
        deploy(args.port, cfg, mpy=args.mpy or bool(args.arch), arch=args.arch, reset=not args.no_reset,
               log=lambda m: print(m, flush=True))
    except DeployError as e:
        print("fleetwire deploy: %s" % e, file=sys.stderr)
        return 2
    return 0

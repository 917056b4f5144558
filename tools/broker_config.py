"""Write a mosquitto configuration that enforces fleet identity: mutual TLS only
(require_certificate), the client certificate's CN as the user name
(use_identity_as_username), the fleet CA's revocation list (crlfile), and an ACL by which
a board publishes only under fleet/<its id>/ and reads only its own commands
(fleet/<id>/cmd/#) and updates (fleet/<id>/ota/#), a collector reads telemetry, and only
the operator publishes commands and updates. The broker's certificate (for --host) is
issued by the fleet CA; boards check it against the same CA.

  fleetwire broker-config --ca ~/.fleetwire/ca --host broker.local --out /etc/mosquitto/fleet
  mosquitto -c /etc/mosquitto/fleet/mosquitto.conf

After `fleetwire ca revoke` on this machine the directory's crl.pem is rewritten: reload the
broker (SIGHUP) to apply it. Host tools log in with certificates from `fleetwire ca issue`.
"""

import os
import sys

from fleetwire.host.identity import pki


def add_arguments(p):
    p.add_argument(
        "--ca",
        metavar="DIR",
        default=None,
        help="the fleet CA (default: $FLEETWIRE_CA, else ~/.fleetwire/ca)",
    )
    p.add_argument(
        "--host",
        action="append",
        default=[],
        required=True,
        help="a name or address boards connect to (repeat); the broker's certificate names them",
    )
    p.add_argument("--out", required=True, metavar="DIR", help="the broker's directory")
    p.add_argument("--port", type=int, default=8883, help="listener port (default %(default)s)")
    p.add_argument("--bind", default=None, help="listen on this address only (default: all)")
    p.add_argument("--operator", action="append", default=None, help="operator identity (default: operator)")
    p.add_argument(
        "--collector", action="append", default=None, help="collector identity (default: collector)"
    )
    p.add_argument(
        "--user",
        default=None,
        help="the system user mosquitto runs as (its `user` option); it must be able to read the directory",
    )


def run(args):
    from fleetwire.host.identity import brokerconf

    if not 0 < args.port < 65536:
        print("fleetwire broker-config: --port must be 1..65535", file=sys.stderr)
        return 2
    try:
        ca = pki.FleetCA(args.ca or pki.default_dir())
        for h in args.host:
            pki.check_name(h, "--host")
        conf = brokerconf.write(
            args.out,
            ca,
            args.host,
            args.port,
            args.bind,
            args.operator or ["operator"],
            args.collector or ["collector"],
        )
    except pki.PKIError as e:
        print("fleetwire broker-config: %s" % e, file=sys.stderr)
        return 2
    if args.user:
        with open(conf, "a") as f:
            f.write("user %s\n" % args.user)
    d = os.path.dirname(conf)
    print("broker configuration for %s in %s" % (", ".join(args.host), d))
    print("  mosquitto.conf, acl, ca.pem, crl.pem, server.pem, server.key (mode 600)")
    print("run: mosquitto -c %s" % conf)
    print("host tools: fleetwire ca issue NAME --role operator|collector --out DIR")
    return 0

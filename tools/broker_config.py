"""Write a mosquitto configuration that enforces fleet identity: mutual TLS only
(require_certificate), the client certificate's CN as the user name
(use_identity_as_username), the fleet CA's revocation list (crlfile), and an ACL by which
a board publishes only under fleet/<its id>/ and reads only its own commands
(fleet/<id>/cmd/#) and updates (fleet/<id>/ota/#), a collector reads telemetry, and only
the operator publishes commands and updates. The broker's certificate (for --host) is
issued by the fleet CA; boards check it against the same CA.

  fleetwire broker-config --ca ~/.fleetwire/ca --host broker.local --out /etc/mosquitto/fleet
  mosquitto -c /etc/mosquitto/fleet/mosquitto.conf

The listener takes at most --max-connections clients (default 12,000). mosquitto needs a file
descriptor per client and keeps the open-file limit it is started with (under systemd 1,024
unless the unit says otherwise): the directory's systemd-limits.conf gives it enough, and the
command says what this machine allows.

After `fleetwire ca revoke` on this machine the directory's crl.pem is rewritten: reload the
broker (SIGHUP) to apply it. Host tools log in with certificates from `fleetwire ca issue`.
"""

import os
import resource
import sys

from fleetwire.host.identity import brokerconf, pki


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
        "--max-connections",
        type=int,
        default=None,
        help="clients the listener takes at most; mosquitto then needs this many file descriptors "
        "and %d more (default %d)" % (brokerconf.FD_SPARE, brokerconf.MAX_CONNECTIONS),
    )
    p.add_argument(
        "--user",
        default=None,
        help="the system user mosquitto runs as (its `user` option); it must be able to read the directory",
    )


def run(args):
    if not 0 < args.port < 65536:
        print("fleetwire broker-config: --port must be 1..65535", file=sys.stderr)
        return 2
    max_conn = brokerconf.MAX_CONNECTIONS if args.max_connections is None else args.max_connections
    if max_conn < 1:
        print("fleetwire broker-config: --max-connections must be 1 or more", file=sys.stderr)
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
            max_connections=max_conn,
        )
    except pki.PKIError as e:
        print("fleetwire broker-config: %s" % e, file=sys.stderr)
        return 2
    if args.user:
        with open(conf, "a") as f:
            f.write("user %s\n" % args.user)
    d = os.path.dirname(conf)
    print("broker configuration for %s in %s" % (", ".join(args.host), d))
    print("  mosquitto.conf, acl, ca.pem, crl.pem, server.pem, server.key (mode 600), systemd-limits.conf")
    need = brokerconf.fd_needed(max_conn)
    print(
        "limits: at most %d clients (max_connections); mosquitto needs an open-file limit of %d, "
        "a descriptor per client, and keeps the one it starts with" % (max_conn, need)
    )
    print(
        "  under systemd: copy systemd-limits.conf to %s, then systemctl daemon-reload (its default is 1024)"
        % brokerconf.DROPIN
    )
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard < need:
        print(
            "  this machine's hard limit for a process is %d, below %d: raise it (nofile in "
            "/etc/security/limits.conf, or LimitNOFILE) or lower --max-connections" % (hard, need)
        )
    else:
        print("  by hand: ulimit -n %d before mosquitto (this machine's hard limit allows it)" % need)
    print("run: mosquitto -c %s" % conf)
    print("host tools: fleetwire ca issue NAME --role operator|collector --out DIR")
    return 0

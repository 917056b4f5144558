"""The fleet CA, on the operator's machine: it issues each board a certificate whose CN is
its device_id (`fleetwire deploy --ca DIR` does that), certificates for the host tools and
the broker, and revokes them. The CA's key stays in DIR/ca.key (mode 600) and is never
printed; keys issued for host tools are written to files of mode 600, never printed.

  fleetwire ca init                                  # DIR: --ca, $FLEETWIRE_CA or ~/.fleetwire/ca
  fleetwire ca issue collector --role collector --out creds/
  fleetwire ca issue operator --role operator --out creds/
  fleetwire ca revoke sensor-17                      # rewrites DIR/crl.pem; reload the broker
  fleetwire ca list
  fleetwire ca crl                                   # a fresh CRL (it is valid for a year)
  fleetwire ca serve --broker HOST:8883 --tls-ca ca.pem --cert operator.pem --key operator.key
                                                     # renews boards' certificates over MQTT
  fleetwire ca order sensor-17 --broker ...          # tells a board to renew now

Brokers get their configuration from `fleetwire broker-config`.
"""

import os
import shlex
import subprocess
import sys

from fleetwire.host.identity import pki
from fleetwire.tools import options


def add_arguments(p):
    sub = p.add_subparsers(dest="action", metavar="ACTION")

    def action(name, help):
        a = sub.add_parser(name, help=help)
        a.add_argument(
            "--ca",
            metavar="DIR",
            default=None,
            help="the CA directory (default: $FLEETWIRE_CA, else ~/.fleetwire/ca)",
        )
        return a

    i = action("init", "make a new fleet CA")
    i.add_argument("--name", default="fleetwire fleet CA", help="the CA's CN (default %(default)s)")
    i.add_argument("--days", type=int, default=pki.CA_DAYS, help="validity (default %(default)s days)")
    i.add_argument(
        "--force",
        action="store_true",
        help="replace an existing CA (every board then needs a new certificate)",
    )
    s = action("issue", "a key and certificate for a host tool (operator, collector) or a broker")
    s.add_argument("name", help="its CN: the user name the broker sees")
    s.add_argument(
        "--role",
        required=True,
        choices=[r for r in pki.ROLES if r != "device"],
        help="operator, collector or server (a broker; give --host)",
    )
    s.add_argument("--host", action="append", default=[], help="server: a DNS name or address (repeat)")
    s.add_argument("--out", required=True, metavar="DIR", help="where NAME.pem, NAME.key and ca.pem go")
    s.add_argument("--days", type=int, default=None, help="validity in days")
    r = action("revoke", "revoke every current certificate of a board or tool")
    r.add_argument("name", help="the device_id or tool name")
    action("list", "the certificates this CA issued")
    action("crl", "write a fresh crl.pem (and the brokers' copies)")
    v = action("serve", "renew boards' certificates over MQTT, within policy, until Ctrl-C")
    options.add_broker(v, default=None)
    options.add_login(v, "operator")
    v.add_argument(
        "--days",
        type=int,
        default=pki.LEAF_DAYS,
        help="validity of a renewed certificate, 1 to %d days (default %%(default)s)" % pki.LEAF_DAYS,
    )
    v.add_argument(
        "--reload",
        metavar="CMD",
        help="run after each revocation so the broker reads the new CRL, e.g. 'systemctl reload mosquitto'",
    )
    o = action("order", "tell boards to renew their certificates now")
    o.add_argument("device_id", nargs="+", help="the boards")
    options.add_broker(o, default=None)
    options.add_login(o, "operator")


def _fail(msg):
    print("fleetwire ca: %s" % msg, file=sys.stderr)
    return 2


def run(args):
    if not args.action:
        return _fail("an action: init, issue, revoke, list or crl (fleetwire ca --help)")
    d = args.ca or pki.default_dir()
    try:
        if args.action == "init":
            if args.days < 1:
                return _fail("--days must be positive")
            ca = pki.FleetCA.create(d, args.name, args.days, args.force)
            print("fleet CA %r made in %s" % (ca.name, ca.dir))
            print("  certificate %s (SHA-256 %s)" % (ca.cert_path, pki.fingerprint(ca.cert)))
            print("  its key stays in %s (mode 600); keep a backup offline" % ca.key_path)
            print(
                "next: fleetwire broker-config --ca %s --host BROKER_NAME --out DIR, then fleetwire deploy "
                "--ca %s ..." % (ca.dir, ca.dir)
            )
            return 0
        ca = pki.FleetCA(d)
        if args.action == "issue":
            if args.role == "server" and not args.host:
                return _fail("a server certificate needs --host (the names boards connect to)")
            os.makedirs(args.out, exist_ok=True)
            issued = ca.issue(args.name, args.role, hosts=args.host, days=args.days)
            base = os.path.join(args.out, args.name)
            pki.write_private(base + ".key", pki.key_pem(issued.key))
            pki.write_public(base + ".pem", pki.pem(issued.cert))
            pki.write_public(os.path.join(args.out, "ca.pem"), pki.pem(ca.cert))
            print(
                "issued %s (%s, serial %s, valid until %s): %s.pem, its key %s.key (mode 600), %s"
                % (
                    args.name,
                    args.role,
                    pki.serial_hex(issued.cert),
                    pki.not_after(issued.cert).date(),
                    base,
                    base,
                    os.path.join(args.out, "ca.pem"),
                )
            )
            return 0
        if args.action == "revoke":
            hit = ca.revoke(args.name)
            for e in hit:
                print("revoked %s (%s, serial %s)" % (e["name"], e["role"], e["serial"]))
            print("CRL written: %s" % ", ".join(ca.write_crl()))
            print(
                "reload the broker so it reads it "
                "(kill -HUP <mosquitto pid>, or systemctl reload mosquitto); "
                "a board already connected is refused at its next connection"
            )
            return 0
        if args.action == "list":
            rows = ca.index()
            print("%-24s %-10s %-40s %-11s %s" % ("name", "role", "serial", "valid until", "status"))
            for e in rows:
                print(
                    "%-24s %-10s %-40s %-11s %s"
                    % (
                        e["name"],
                        e["role"],
                        e["serial"],
                        e["not_after"][:10],
                        "revoked " + e["revoked"][:10] if e.get("revoked") else "current",
                    )
                )
            return 0
        if args.action == "crl":
            print("CRL written: %s" % ", ".join(ca.write_crl()))
            return 0
        if args.action in ("serve", "order"):
            return _serve(args, ca)
    except pki.PKIError as e:
        return _fail(e)
    return _fail("unknown action %r" % args.action)


def _serve(args, ca):
    from fleetwire.host.identity.issuer import IssuerService, order

    why = options.login_problem(args)
    if why or not args.cert:
        return _fail(why or "the issuer logs in as the operator: --tls-ca, --cert and --key")
    if args.action == "serve" and not 1 <= args.days <= pki.LEAF_DAYS:
        return _fail("--days: 1 to %d" % pki.LEAF_DAYS)
    reload = None
    if args.action == "serve" and args.reload:
        cmd = shlex.split(args.reload)

        def reload():
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode:
                print(
                    "fleetwire ca: --reload exited %d: %s" % (r.returncode, r.stderr.strip()), file=sys.stderr
                )

    if args.action == "order":
        order(args.device_id, args.broker[0], args.broker[1], args.tls_ca, args.cert, args.key)
        print("ordered %s to renew its certificate" % ", ".join(args.device_id))
        return 0
    svc = IssuerService(
        ca,
        args.broker[0],
        args.broker[1],
        args.tls_ca,
        args.cert,
        args.key,
        days=args.days,
        on_revoke=reload,
    )
    svc.start()
    options.stop_on_signals()
    try:
        print(
            "issuing for %s on %s:%d (Ctrl-C stops)" % (ca.name, args.broker[0], args.broker[1]), flush=True
        )
        import threading

        threading.Event().wait()
    except KeyboardInterrupt:
        return 0
    finally:
        svc.stop()

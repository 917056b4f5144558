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

Brokers get their configuration from `fleetwire broker-config`.
"""

import os
import sys

from fleetwire.host.identity import pki


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
    except pki.PKIError as e:
        return _fail(e)
    return _fail("unknown action %r" % args.action)

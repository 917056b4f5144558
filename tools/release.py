"""The fleet's release-signing keys, on the operator's machine: a board takes a release, an
order back or a key update only when one of the keys it holds signed it. They are apart from
the fleet CA (`fleetwire ca`): the CA says who may join the fleet, these keys who may put code
on it, and they may live on another machine. Private keys stay in DIR/ID.key (mode 600) and
are never printed; the public ones go to the boards.

  fleetwire release init                           # DIR: --dir, $FLEETWIRE_RELEASE or ~/.fleetwire/release
  fleetwire deploy ... --release-keys DIR          # each board gets the public keys
  fleetwire rollout ... --release-keys DIR         # each offer is signed
  fleetwire release rotate                         # a new key: boards take both, the new one signs
  fleetwire release publish --broker HOST:PORT --tls-ca ca.pem --cert operator.pem \\
      --key operator.key --devices fleet.txt       # the key update, to every board (retained)
  fleetwire release retire                         # the old key goes; publish again
  fleetwire release list

Key updates need no visit: each carries the whole key set and a number that only grows, and a
board takes one only when a key it holds signed it.
"""

import sys

from fleetwire.tools import options


def add_arguments(p):
    sub = p.add_subparsers(dest="action", metavar="ACTION")

    def action(name, help):
        a = sub.add_parser(name, help=help)
        a.add_argument(
            "--dir",
            metavar="DIR",
            default=None,
            help="the release-key directory (default: $FLEETWIRE_RELEASE, else ~/.fleetwire/release)",
        )
        return a

    i = action("init", "make the fleet's first release-signing key")
    i.add_argument(
        "--bits", type=int, default=3072, help="RSA key size: 2048, 3072 or 4096 (default %(default)s)"
    )
    i.add_argument(
        "--force",
        action="store_true",
        help="start over (every board then needs fleetwire deploy --release-keys)",
    )
    r = action(
        "rotate", "add a new key, which signs from now on; boards take both until the old one is retired"
    )
    r.add_argument("--bits", type=int, default=3072, help="RSA key size (default %(default)s)")
    t = action("retire", "drop a key from the set (default: every key but the signing one)")
    t.add_argument("key", nargs="?", help="the key id (fleetwire release list)")
    action("list", "the key set: its number, each key and which one signs")
    u = action("publish", "send the newest key update to boards (retained on fleet/<id>/ota/keys)")
    options.add_broker(u, default=None)
    g = u.add_argument_group("devices")
    g.add_argument("--devices", metavar="FILE", help="one device id a line (as fleetwire rollout reads it)")
    g.add_argument("--device", action="append", default=[], metavar="ID", help="a device (repeat)")
    options.add_login(u, "operator")


def _fail(msg):
    print("fleetwire release: %s" % msg, file=sys.stderr)
    return 2


def run(args):
    from fleetwire.host.identity import signing as rk

    if not args.action:
        return _fail("an action: init, rotate, retire, list or publish (fleetwire release --help)")
    d = args.dir or rk.default_dir()
    try:
        if args.action == "init":
            k = rk.ReleaseKeys.create(d, args.bits, args.force)
            print("release-signing key %s made in %s (key set %d)" % (k.signing_id, k.dir, k.seq))
            print(
                "  its private key stays in %s/%s.key (mode 600); keep a backup offline"
                % (k.dir, k.signing_id)
            )
            print(
                "next: fleetwire deploy --release-keys %s ..., then fleetwire rollout --release-keys %s ..."
                % (k.dir, k.dir)
            )
            return 0
        k = rk.ReleaseKeys(d)
        if args.action == "rotate":
            old = k.signing_id
            new = k.rotate(args.bits)
            print(
                "key %s added (key set %d: %s); it signs releases from now on"
                % (new, k.seq, ", ".join(k.ids))
            )
            print(
                "next: fleetwire release publish ... (boards take %s and keep %s), then fleetwire "
                "release retire %s and publish again" % (new, old, old)
            )
            return 0
        if args.action == "retire":
            gone = k.retire(args.key)
            print("retired %s (key set %d: %s)" % (", ".join(gone), k.seq, ", ".join(k.ids)))
            print(
                "next: fleetwire release publish ...; boards refuse what %s signs once they take it; "
                "its private key file stays until you delete it" % ", ".join(gone)
            )
            return 0
        if args.action == "list":
            print("key set %d in %s" % (k.seq, k.dir))
            for kid in k.ids:
                print("  %s  %s" % (kid, "signs" if kid == k.signing_id else "accepted"))
            for kid in k.state.get("retired", []):
                print("  %s  retired" % kid)
            return 0
        if args.action == "publish":
            return _publish(args, k)
    except rk.SigningError as e:
        return _fail(e)
    return _fail("unknown action %r" % args.action)


def _publish(args, k):
    from fleetwire.host.rollout.service import ServiceError, UpdateService
    from fleetwire.tools.rollout import read_devices

    why = options.login_problem(args)
    if why:
        return _fail(why)
    ids = list(args.device)
    try:
        if args.devices:
            ids = read_devices(args.devices)[0] + ids
    except OSError as e:
        return _fail("cannot read --devices %s: %s" % (args.devices, e.strerror))
    except ValueError as e:
        return _fail(str(e))
    if not ids:
        return _fail("which devices? --devices FILE or --device ID")
    host, port = args.broker
    import os

    svc = UpdateService(
        host,
        port,
        client_id="fleetwire-release-%d" % os.getpid(),
        tls_ca=args.tls_ca,
        tls_cert=args.cert,
        tls_key=args.key,
        user=args.user,
        password=options.password() if args.user else None,
        watch=False,
    )
    try:
        svc.start()
        svc.publish_keys(ids, k.update())
    except ServiceError as e:
        print("fleetwire release: %s" % e, file=sys.stderr)
        return 1
    finally:
        svc.stop()
    print(
        "key set %d (%s) published to %d devices (retained on fleet/<id>/ota/keys)"
        % (k.seq, ", ".join(k.ids), len(ids))
    )
    return 0

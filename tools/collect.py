"""Land the fleet's telemetry for `fleetwire report`: subscribe to fleet/+/telemetry at
QoS 1 on a persistent session and append every record (with rx_ts, the receive time) to
hourly NDJSON files, LANDING/date=YYYY-MM-DD/hour=HH/<id>-<opened>.ndjson, each renamed
into place when complete. Malformed records go to LANDING/_quarantine/ with the reason.
Runs until Ctrl-C or SIGTERM, then closes its files.

  fleetwire collect --broker 127.0.0.1:1883 --landing landing/
  fleetwire collect --broker 127.0.0.1:1883 --landing landing/ --id c2 --share fleet   # scale out
  FLEETWIRE_MQTT_PASSWORD=... fleetwire collect --broker HOST:1883 --user collector --landing landing/
  fleetwire collect --broker broker.local:8883 --tls-ca ca.pem --cert collector.pem --key collector.key \\
      --landing landing/          # a broker that enforces identity (fleetwire broker-config)
"""

import sys
import time

from fleetwire.tools import options


def add_arguments(p):
    options.add_broker(p)
    p.add_argument("--landing", required=True, help="the landing zone directory")
    p.add_argument(
        "--id",
        default="collector-1",
        help="client id, also the file name prefix: keep it across restarts (default %(default)s)",
    )
    p.add_argument(
        "--share", metavar="GROUP", help="join shared subscription $share/GROUP/... (several collectors)"
    )
    p.add_argument("--topic", default="fleet/+/telemetry", help="topic filter (default %(default)s)")
    p.add_argument("--fsync", action="store_true", help="fsync each file before its rename (power-cut safe)")
    p.add_argument(
        "--commands",
        action="store_true",
        help="also land command answers and reported states (fleet/+/answer, /reported) in _commands/",
    )
    options.add_login(p, "collector")


def run(args):
    from fleetwire.host.fleet.collector import Collector

    host, port = args.broker
    why = options.login_problem(args)
    if why:
        print("fleetwire collect: %s" % why, file=sys.stderr)
        return 2
    try:
        c = Collector(
            host,
            port,
            args.landing,
            args.id,
            args.share,
            args.topic,
            fsync=args.fsync,
            user=args.user,
            password=options.password(),
            tls_ca=args.tls_ca,
            tls_cert=args.cert,
            tls_key=args.key,
            commands=args.commands,
        )
        c.start()
    except (OSError, ValueError, RuntimeError) as e:
        print("fleetwire collect: %s" % e, file=sys.stderr)
        return 2
    options.stop_on_signals()
    try:  # from the line that says Ctrl-C stops it on, a Ctrl-C closes the files
        print(
            "fleetwire collect: %s from %s:%d into %s (Ctrl-C stops)" % (c.topic, host, port, args.landing),
            flush=True,
        )
        while True:
            time.sleep(10)
            print(
                "  received %d, landed %d, quarantined %d%s"
                % (c.received, c.landed, c.quarantined, "; " + c.error if c.error else ""),
                flush=True,
            )
    except KeyboardInterrupt:
        pass
    finally:
        c.stop()
        print(
            "fleetwire collect: received %d, landed %d, quarantined %d, %d files closed"
            % (c.received, c.landed, c.quarantined, c.files),
            flush=True,
        )
    return 0

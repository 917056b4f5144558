"""Options several commands share, defined once: where the broker is (--broker HOST:PORT)
and how a host tool logs in to it (--tls-ca, --cert, --key, --user; the password from
$FLEETWIRE_MQTT_PASSWORD, kept out of the process list)."""

import argparse
import os
import signal


def broker_address(text):
    """argparse type: HOST:PORT -> (host, port)."""
    host, _, port = text.rpartition(":")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError("--broker is HOST:PORT, not %r" % text)
    return host or "127.0.0.1", int(port)


def add_broker(p, default="127.0.0.1:1883"):
    """--broker HOST:PORT: args.broker is (host, port)."""
    if default is None:
        p.add_argument("--broker", required=True, type=broker_address, help="HOST:PORT")
    else:
        kw = dict(default=broker_address(default), help="HOST:PORT (default %s)" % default)
        p.add_argument("--broker", type=broker_address, **kw)


def add_login(p, who):
    """--tls-ca, --cert, --key, --user: how `who` (a host tool) logs in."""
    g = p.add_argument_group("login (the %s's)" % who)
    g.add_argument("--tls-ca", metavar="FILE", help="TLS: the CA of the broker's certificate (PEM)")
    g.add_argument("--cert", metavar="FILE", help="mutual TLS: its certificate (fleetwire ca issue)")
    g.add_argument("--key", metavar="FILE", help="its private key")
    g.add_argument("--user", help="MQTT user name; the password comes from $FLEETWIRE_MQTT_PASSWORD")


def login_problem(args):
    """What is wrong with the login options -> one line, or None."""
    if (args.cert or args.key) and not (args.cert and args.key and args.tls_ca):
        return "--cert and --key go together, with --tls-ca"
    for f in (args.tls_ca, args.cert, args.key):
        if f and not os.path.isfile(f):
            return "%s: no such file" % f
    return None


def password():
    return os.environ.get("FLEETWIRE_MQTT_PASSWORD")


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def stop_on_signals():
    """From here on SIGTERM (a service manager's stop, `kill`) stops a long-running command as
    Ctrl-C does, and so does SIGINT even where the shell started it with SIGINT ignored (a
    script's `cmd &`: without this, `kill -INT` would never stop it)."""
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)

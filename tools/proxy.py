"""Run the fault-injecting MQTT proxy between your client and a broker, and watch
every packet go by. Faults come from a script (or none: a logging proxy):

  fleetwire proxy --listen 127.0.0.1:1884 --upstream 127.0.0.1:1883 --script chaos.txt

"""

import sys
import threading

from fleetwire.host.testing.proxyscript import SCRIPT_HELP
from fleetwire.tools import options

__doc__ += (
    SCRIPT_HELP
    + """
Example script (cut once the 3rd PUBREC reaches the client, then black out
for 10 s; again and again):
  wait 5
  cut down after PUBREC 3
  wait 5
  blackhole on
  wait 10
  blackhole off
  repeat
"""
)


def _hostport(text):
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError("%r is not HOST:PORT" % text)
    return host or "127.0.0.1", int(port)


def add_arguments(p):
    p.add_argument("--listen", default="127.0.0.1:1884", help="HOST:PORT to listen on (default %(default)s)")
    p.add_argument("--upstream", default="127.0.0.1:1883", help="the broker, HOST:PORT (default %(default)s)")
    p.add_argument("--script", help="a file of fault steps (see above); without it, only log")
    p.add_argument("--quiet", action="store_true", help="do not print each packet")
    p.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow addresses other than loopback (off: the proxy is a test tool)",
    )


def run(args):
    from fleetwire.host.testing import proxy, proxyscript

    try:
        listen = _hostport(args.listen)
        upstream = _hostport(args.upstream)
        steps = []
        if args.script:
            with open(args.script) as f:
                steps = proxyscript.parse_script(f.read())
        p = proxy.Proxy(
            upstream,
            listen,
            allow_remote=args.allow_remote,
            echo=None if args.quiet else (lambda e: print(e, flush=True)),
        )
        p.start()
    except (OSError, ValueError) as e:
        print("fleetwire proxy: %s" % e, file=sys.stderr)
        return 2
    print(
        "fleetwire proxy: %s:%d -> %s:%d%s (Ctrl-C stops)"
        % (
            p.address[0],
            p.port,
            upstream[0],
            upstream[1],
            ", script %s (%d steps)" % (args.script, len(steps)) if steps else "",
        ),
        flush=True,
    )
    stop = threading.Event()
    options.stop_on_signals()
    try:
        if steps:
            proxyscript.run_script(p, steps, stop)
        threading.Event().wait()  # until Ctrl-C
    except KeyboardInterrupt:
        pass
    finally:
        stop.set()
        p.stop()
        print("fleetwire proxy: %d connections, %d cut, %d refused" % (p.accepted, p.cuts, p.refused))
    return 0

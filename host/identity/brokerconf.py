"""A mosquitto configuration that enforces fleet identity (`fleetwire broker-config`):
mutual TLS only (require_certificate), the certificate's CN as the user name
(use_identity_as_username), the fleet CA's revocation list (crlfile) and an ACL that gives
each identity its own topics:

    a board <id>     publishes fleet/<id>/<name> (one level: telemetry, status, cert_req, its
                     command answers fleet/<id>/answer, its reported state fleet/<id>/reported,
                     ...) and fleet/<id>/data/#; reads only fleet/<id>/cmd/# (its commands,
                     fleet/<id>/cmd/run, and its desired state, fleet/<id>/cmd/desired),
                     fleet/<id>/ota/# and fleet/<id>/cert/# (its renewed certificate)
    a collector      reads fleet/+/telemetry and fleet/+/crash, and the answers and reported
                     states it lands
    the operator     reads fleet/#; alone publishes commands and desired state
                     (fleet/+/cmd/#), updates (fleet/+/ota/#, reserved for over-the-air
                     updates) and renewed certificates (fleet/+/cert/#, `fleetwire ca serve`)

The ACL's patterns hold for every identity (%u is its CN), so a collector or operator has a
board's rights on fleet/<its name>/ too; `fleetwire ca` keeps a board from taking a service's
name. mosquitto 2.0 grants every SUBSCRIBE and filters delivery by the read rules, and drops
a PUBLISH the write rules refuse (still acknowledged at QoS 1/2, so a client cannot probe).
The host test broker (fleetwire.host.brokers.mosquitto, identity=...) runs the lines written here.

Limits: mosquitto holds a file descriptor per connected client and keeps the open-file limit it
was started with (it never raises its own; mosquitto 2.0.11, /proc/PID/limits), and a service
under systemd starts with 1,024 unless its unit says otherwise. Past that limit accept() fails:
a fleet of a few thousand boards is refused with no reason a board could log. So the listener
has max_connections, below the descriptors the broker is given (fd_needed()): over it a client
is turned away at once and retries with its backoff, while the broker keeps serving the others
and the services; and the directory holds a systemd drop-in that gives the broker those
descriptors (systemd-limits.conf).
"""

import os

from fleetwire.host.identity import pki

MAX_CONNECTIONS = 12000  # a 10,000-device fleet, its services and room to grow
# descriptors past the clients': listeners, the log, the persistence file, CRL and certificates on reload
FD_SPARE = 64
DROPIN = "/etc/systemd/system/mosquitto.service.d/"


def fd_needed(max_connections):
    """The open-file limit mosquitto needs for `max_connections` clients."""
    return max_connections + FD_SPARE


def limits_lines(max_connections):
    """The listener's connection limit, with the reason (after its `listener` line)."""
    return [
        "# a file descriptor per client: start mosquitto with an open-file limit of at least %d"
        % fd_needed(max_connections),
        "# (systemd: systemd-limits.conf in %s; by hand: ulimit -n %d)"
        % (DROPIN, fd_needed(max_connections)),
        "max_connections %d" % max_connections,
    ]


def systemd_dropin(max_connections):
    return (
        "# fleetwire broker-config: mosquitto keeps the open-file limit it starts with, and needs one\n"
        "# per client (max_connections %d). Copy to %s, then: systemctl daemon-reload;\n"
        "# systemctl restart mosquitto\n[Service]\nLimitNOFILE=%d\n"
        % (max_connections, DROPIN, fd_needed(max_connections))
    )


# Board topics, in one place (the docs and the tests name them too).
TELEMETRY = "fleet/%s/telemetry"
COMMANDS = "fleet/%s/cmd/"
ANSWER = "fleet/%s/answer"
REPORTED = "fleet/%s/reported"
OTA = "fleet/%s/ota/"
CERT = "fleet/%s/cert/"  # the issuer -> a board: cert/new, cert/refused; the operator: cert/renew
CERT_REQ = "fleet/%s/cert_req"  # a board -> the issuer: its certificate, to be renewed
CERT_OK = "fleet/%s/cert_ok"  # a board -> the issuer: switched (or not) to the new one


def acl_text(operators=("operator",), collectors=("collector",)):
    """The acl_file: patterns for every board, then the services' own rules."""
    lines = [
        "# fleetwire identity ACL (fleetwire broker-config). The user name is the client",
        "# certificate's CN (use_identity_as_username); %u stands for it.",
        "#",
        "# Every board: publish one level under fleet/<its id>/ (telemetry, status, ...) and",
        "# under fleet/<its id>/data/; read only its own commands, updates and renewed",
        "# certificates. A command, update or certificate topic itself (fleet/<id>/cmd,",
        "# fleet/<id>/ota, fleet/<id>/cert) is nobody's to publish.",
        "pattern write fleet/%u/+",
        "pattern write fleet/%u/data/#",
        "pattern deny fleet/%u/cmd",
        "pattern deny fleet/%u/ota",
        "pattern deny fleet/%u/cert",
        "pattern read fleet/%u/cmd/#",
        "pattern read fleet/%u/ota/#",
        "pattern read fleet/%u/cert/#",
    ]
    for name in collectors:
        pki.check_name(name, "collector name")
        lines += [
            "",
            "# a collector: the fleet's telemetry, crash records, command answers and reported states",
            "user %s" % name,
            "topic read fleet/+/telemetry",
            "topic read fleet/+/crash",
            "topic read fleet/+/answer",
            "topic read fleet/+/reported",
        ]
    for name in operators:
        pki.check_name(name, "operator name")
        lines += [
            "",
            "# the operator: reads everything; alone sends commands, desired state, updates and certificates",
            "user %s" % name,
            "topic read fleet/#",
            "topic write fleet/+/cmd/#",
            "topic write fleet/+/ota/#",
            "topic write fleet/+/cert/#",
        ]
    return "\n".join(lines) + "\n"


def listener_lines(port, bind, cafile, certfile, keyfile, crlfile):
    """The mutual-TLS listener (its TLS options follow it, as mosquitto wants)."""
    return [
        "listener %d %s" % (port, bind) if bind else "listener %d" % port,
        "cafile %s" % cafile,
        "certfile %s" % certfile,
        "keyfile %s" % keyfile,
        "crlfile %s" % crlfile,
        "require_certificate true",
        "use_identity_as_username true",
    ]


def security_lines(acl_path):
    """Global options: nobody without a certificate, and the ACL."""
    return ["allow_anonymous false", "acl_file %s" % acl_path]


def write(
    out,
    ca,
    hosts,
    port=8883,
    bind=None,
    operators=("operator",),
    collectors=("collector",),
    log_dest="stdout",
    persistence=True,
    max_connections=MAX_CONNECTIONS,
):
    """Write a complete broker directory for `ca` (a pki.FleetCA) -> the config's path:
    mosquitto.conf, acl, ca.pem, crl.pem, server.pem and server.key (a certificate for
    `hosts`, issued now by the fleet CA), systemd-limits.conf (the descriptors for
    `max_connections` clients). The CA remembers the directory, so a
    revocation refreshes its crl.pem."""
    if not hosts:
        raise pki.PKIError(
            "the broker needs at least one host name or address for its certificate "
            "(the name boards connect to; they check it)"
        )
    out = os.path.abspath(out)
    for name in operators:
        ca.reserve(name, "operator")
    for name in collectors:
        ca.reserve(name, "collector")
    os.makedirs(out, exist_ok=True)
    issued = ca.issue(hosts[0], role="server", hosts=hosts)
    pki.write_private(os.path.join(out, "server.key"), pki.key_pem(issued.key))
    pki.write_public(os.path.join(out, "server.pem"), pki.pem(issued.cert))
    pki.write_public(os.path.join(out, "ca.pem"), pki.pem(ca.cert))
    acl = os.path.join(out, "acl")
    pki.write_public(acl, acl_text(operators, collectors).encode())
    ca.add_broker(out)
    p = lambda name: os.path.join(out, name)  # noqa: E731
    lines = [
        "# fleetwire broker-config: mutual TLS, one identity per certificate (%s)" % ca.name,
        "# run: mosquitto -c %s ; after `fleetwire ca revoke` reload it (SIGHUP)" % p("mosquitto.conf"),
        "per_listener_settings false",
    ]
    lines += security_lines(acl)
    lines.append("log_dest %s" % log_dest)
    lines.append("connection_messages true")
    if persistence:
        lines += ["persistence true", "persistence_location %s/" % out]
    lines += listener_lines(port, bind, p("ca.pem"), p("server.pem"), p("server.key"), p("crl.pem"))
    lines += limits_lines(max_connections)
    pki.write_public(p("systemd-limits.conf"), systemd_dropin(max_connections).encode())
    conf = p("mosquitto.conf")
    pki.write_public(conf, ("\n".join(lines) + "\n").encode())
    return conf

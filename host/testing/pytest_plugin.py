"""pytest fixtures for tests that need real components: mosquitto on loopback, an
independent paho-mqtt observer, a scripted broker. paho and the rig modules are
imported inside the fixtures, so this plugin loads where paho is not installed.

When a test that used a mosquitto (or a broker of the matrix) fails, the tail of that
broker's log is added to the failure report.

The broker matrix: a test that takes the `broker` fixture runs once for each broker of
fleetwire.host.brokers.matrix() (mosquitto, aedes, amqtt, rabbitmq), each started once
per session and shared, the tests grouped by broker."""

import pytest


@pytest.fixture(scope="session")
def mosquitto():
    """One plain mosquitto for the session (127.0.0.1, a free port). Shared: use
    topics of your own and clear retained messages you leave."""
    from fleetwire.host.brokers.mosquitto import Mosquitto

    with Mosquitto() as b:
        yield b


@pytest.fixture(scope="session")
def mosquitto_tls():
    """A session mosquitto with TLS listeners: .tls_port (certificate for localhost and
    127.0.0.1), .tls_mismatch_port (certificate for another name), .ca_pem, .ca_der;
    .port is plain MQTT as usual."""
    from fleetwire.host.brokers.mosquitto import Mosquitto

    with Mosquitto(tls=True) as b:
        yield b


@pytest.fixture(scope="session")
def fleet_ca(tmp_path_factory):
    """A fleet CA (fleetwire.host.identity.pki.FleetCA) for the session, as `fleetwire ca init` makes it."""
    from fleetwire.host.identity.pki import FleetCA

    return FleetCA.create(str(tmp_path_factory.mktemp("fleet-ca")))


@pytest.fixture(scope="session")
def identity_mosquitto(fleet_ca):
    """A session mosquitto that enforces fleet identity, as `fleetwire broker-config` writes it:
    one listener, .port, mutual TLS only (CN as user name, the ACL, fleet_ca's CRL);
    .ca_pem/.ca_der are the fleet CA's. Identities: issue with fleet_ca; reload() after a
    revocation."""
    from fleetwire.host.brokers.mosquitto import Mosquitto

    with Mosquitto(identity=fleet_ca) as b:
        yield b


@pytest.fixture(scope="session")
def host_credentials(fleet_ca, tmp_path_factory):
    """host_credentials(name, role="operator") -> (certificate, key) files for a host tool,
    issued by fleet_ca once per name."""
    made = {}
    d = str(tmp_path_factory.mktemp("host-credentials"))

    def get(name, role="operator"):
        if name not in made:
            made[name] = fleet_ca.credentials(name, role, d)
        return made[name]

    return get


@pytest.fixture
def fresh_mosquitto():
    """fresh_mosquitto(persistence=True, ...) -> a new running broker (Mosquitto's
    keyword arguments) that this test may stop, kill and restart; closed afterwards."""
    from fleetwire.host.brokers.mosquitto import Mosquitto

    def make(**kw):
        b = Mosquitto(**kw)
        make.brokers.append(b)
        return b.start()

    make.brokers = []
    yield make
    for b in make.brokers:
        b.close()


@pytest.fixture(scope="session")
def broker_pool():
    """broker_pool(name) -> that matrix broker, running; started on first use, shared by
    the whole session (use topics and client ids of your own), closed at its end."""
    from fleetwire.host.brokers import make

    pool = {}

    def get(name):
        if name not in pool:
            pool[name] = make(name).start()
        return pool[name]

    yield get
    for b in pool.values():
        b.close()


def pytest_generate_tests(metafunc):
    if "broker" in metafunc.fixturenames:
        from fleetwire.host.brokers import matrix

        metafunc.parametrize("broker", matrix(), indirect=True, scope="session")


@pytest.fixture(scope="session")
def broker(request, broker_pool):
    """One broker of the matrix (the test runs once per broker): .name, .version, .host,
    .port, .quirk(feature), .DENIED_PREFIX (fleetwire.host.brokers.base.Broker)."""
    return broker_pool(request.param)


@pytest.fixture
def make_observer(request):
    """make_observer(broker=None, tls=False, identity=None, **kw) -> a connected Observer (see
    fleetwire.host.testing.observer) on broker (default: the session `mosquitto`); with
    tls=True it goes through broker.tls_port with broker.ca_pem. On a broker that enforces
    identity it logs in with a certificate: the operator's, or identity=(name, role).
    Closed afterwards."""
    from fleetwire.host.testing.observer import Observer

    made = []

    def make(broker=None, tls=False, identity=None, **kw):
        if broker is None:
            broker = request.getfixturevalue("mosquitto")
        if identity is not None or getattr(broker, "identity", None) is not None:
            # a broker that wants a certificate: the operator's unless told (identity=(name, role))
            name, role = identity or ("operator", "operator")
            cert, key = request.getfixturevalue("host_credentials")(name, role)
            o = Observer(broker.host, broker.port, tls_ca=broker.ca_pem, tls_cert=cert, tls_key=key, **kw)
        elif tls:
            kw.setdefault("tls_ca", broker.ca_pem)
            o = Observer(broker.host, broker.tls_port, **kw)
        else:
            o = Observer(broker.host, broker.port, **kw)
        made.append(o)
        return o

    yield make
    for o in made:
        o.close()


@pytest.fixture
def observer(mosquitto, make_observer):
    """An Observer connected to the session `mosquitto`."""
    return make_observer(mosquitto)


@pytest.fixture
def make_proxy(request):
    """make_proxy(broker=None) -> a started fault-injecting Proxy (fleetwire.host.testing.proxy)
    in front of broker (default: the session `mosquitto`); stopped afterwards."""
    from fleetwire.host.testing.proxy import Proxy

    made = []

    def make(broker=None):
        if broker is None:
            broker = request.getfixturevalue("mosquitto")
        p = Proxy((broker.host, broker.port)).start()
        made.append(p)
        return p

    yield make
    for p in made:
        p.stop()


@pytest.fixture
def scripted_broker():
    """A ScriptedBroker (fleetwire.host.testing.scripted_broker) on 127.0.0.1:.port."""
    from fleetwire.host.testing.scripted_broker import ScriptedBroker

    b = ScriptedBroker()
    yield b
    b.close()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    rep = yield
    if rep.failed and rep.when in ("call", "teardown"):
        args = getattr(item, "funcargs", {})
        brokers = [
            args[n] for n in ("mosquitto", "mosquitto_tls", "identity_mosquitto", "broker") if n in args
        ]
        brokers += getattr(args.get("fresh_mosquitto"), "brokers", [])
        for b in brokers:
            try:
                tail = "\n".join(b.log_text().splitlines()[-40:])
            except Exception:  # a report must not fail because of a log
                continue
            if tail:
                name = getattr(b, "name", "mosquitto")
                rep.sections.append(("%s %s:%s log (tail)" % (name, b.host, b.port), tail))
    return rep

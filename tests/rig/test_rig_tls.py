"""The TLS listener: the generated CA verifies it (PEM and DER, host name and IP),
MQTT runs over it, and the certificate made for another name fails the host check."""

import socket
import ssl
import subprocess

import pytest

from fleetwire.codec.packets import Connack, Connect, decode_all


def strict_context(**kw):
    ctx = ssl.create_default_context(**kw)
    ctx.verify_flags |= ssl.VERIFY_X509_STRICT  # Python 3.13's default; mbedTLS is as fussy
    return ctx


def mqtt_connect_over_tls(ctx, port, server_hostname):
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        with ctx.wrap_socket(raw, server_hostname=server_hostname) as s:
            s.sendall(Connect("rig-tls-%s" % server_hostname, True, 30).encode())
            data = b""
            while len(data) < 4:
                chunk = s.recv(4 - len(data))
                assert chunk, "closed after %r" % data
                data += chunk
            return decode_all(data)


@pytest.mark.parametrize("name", ["localhost", "127.0.0.1"])
def test_the_generated_ca_verifies_the_broker(mosquitto_tls, name):
    ctx = strict_context(cafile=mosquitto_tls.ca_pem)
    assert mqtt_connect_over_tls(ctx, mosquitto_tls.tls_port, name) == [Connack(False, 0)]


def test_the_der_ca_works_as_cadata(mosquitto_tls):
    # MicroPython's ssl takes the CA as DER bytes; CPython accepts the same form.
    with open(mosquitto_tls.ca_der, "rb") as f:
        der = f.read()
    assert der[:1] == b"\x30"  # an ASN.1 SEQUENCE, not PEM text
    ctx = strict_context(cadata=der)
    assert mqtt_connect_over_tls(ctx, mosquitto_tls.tls_port, "localhost") == [Connack(False, 0)]


def test_the_mismatching_certificate_fails_the_host_name_check(mosquitto_tls):
    ctx = strict_context(cafile=mosquitto_tls.ca_pem)
    with pytest.raises(ssl.SSLCertVerificationError) as e:
        mqtt_connect_over_tls(ctx, mosquitto_tls.tls_mismatch_port, "localhost")
    assert "mismatch" in e.value.verify_message.lower()
    # Same CA, so it is only the name: without the host check it verifies.
    ctx.check_hostname = False
    assert mqtt_connect_over_tls(ctx, mosquitto_tls.tls_mismatch_port, "localhost") == [Connack(False, 0)]


def test_without_the_ca_verification_fails(mosquitto_tls):
    ctx = ssl.create_default_context()  # system CAs only
    with pytest.raises(ssl.SSLCertVerificationError):
        mqtt_connect_over_tls(ctx, mosquitto_tls.tls_port, "localhost")


def test_observer_over_tls_and_plain_on_the_same_broker(mosquitto_tls, make_observer):
    secure = make_observer(mosquitto_tls, tls=True)
    plain = make_observer(mosquitto_tls)
    secure.subscribe("rig/tls", 1)
    plain.publish("rig/tls", b"across listeners", qos=1)
    assert secure.wait_for(1) == [("rig/tls", b"across listeners", 1, False)]


def test_tls_listeners_are_on_loopback(mosquitto_tls):
    b = mosquitto_tls
    assert len({b.port, b.tls_port, b.tls_mismatch_port}) == 3
    with open(b.config_path) as f:
        assert sum(l.startswith("listener ") and l.split()[2] == "127.0.0.1" for l in f) == 3


MP_TLS = """
import ssl, socket
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
ctx.verify_mode = ssl.CERT_REQUIRED
with open(%(der)r, "rb") as f:
    ctx.load_verify_locations(cadata=f.read())
s = socket.socket()
s.connect(socket.getaddrinfo("127.0.0.1", %(port)d)[0][-1])
try:
    s = ctx.wrap_socket(s, server_hostname="localhost")
    s.write(%(connect)r)
    print("reply", s.read(4))
except Exception as e:
    print("refused", repr(e))
"""


@pytest.mark.micropython
@pytest.mark.parametrize("listener", ["tls_port", "tls_mismatch_port"])
def test_micropython_ssl_takes_the_der_ca(mosquitto_tls, listener):
    from fleetwire.host.rig import micropython

    try:
        mp = micropython.binary()
    except micropython.MicroPythonMissing as e:
        pytest.skip(str(e))
    code = MP_TLS % {
        "der": mosquitto_tls.ca_der,
        "port": getattr(mosquitto_tls, listener),
        "connect": Connect("rig-mp-tls", True, 30).encode(),
    }
    r = subprocess.run([mp, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    if listener == "tls_port":
        assert r.stdout.strip() == "reply %r" % Connack(False, 0).encode()
    else:
        assert r.stdout.startswith("refused") and "CN" in r.stdout, r.stdout

# TLS for MQTTClient: loaded by the first connect() of a client built with ssl=.
def wrap(sock, ssl, params, server):
    """sock wrapped in TLS: ssl is an SSLContext (current MicroPython and CPython; the host
    name is checked), or True with ssl_params, umqtt's older way."""
    if ssl is True:
        import ssl as m

        return m.wrap_socket(sock, **(params or {}))
    try:
        return ssl.wrap_socket(sock, server_hostname=server)
    except ValueError as e:
        # MicroPython says a broker's certificate failed verification with a ValueError:
        # it is the connection that failed (reconnect=True retries it), not an argument
        raise OSError(-1, str(e))

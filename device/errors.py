# fleetwire's exceptions, and say(), which words them. A caller that must act differently
# on a failure tells it by its class; the text says what happened and what to do. The
# texts live in reasons.py and are read only when an error is raised, so they cost a
# board no RAM until then (a class costs about 100 bytes on a 32-bit board: bench/heap.py).


class MQTTException(Exception):
    """Base of fleetwire's errors."""


class ConnectRefused(MQTTException):
    """CONNACK refused the connection: args[0] is the return code (as in umqtt.simple's
    MQTTException), args[1] says what it means."""

    def __str__(self):
        return self.args[1]


class Timeout(MQTTException):
    """A blocking call ran out of `timeout`; what it started goes on (a message stays queued)."""


class NotConnected(MQTTException):
    """The call needs a connection and there is none (connect(), or reconnect=True)."""


class SubscribeRefused(MQTTException):
    """The broker refused the subscription (SUBACK 0x80)."""


class QueueFull(MQTTException):
    """queue_size messages are accepted and not yet complete; loop() until one completes."""


class ProtocolError(MQTTException):
    """The broker broke MQTT 3.1.1; the connection is closed."""


def say(key, *values):
    """The text of error `key` (fleetwire.reasons, loaded now, not at import)."""
    try:
        from .reasons import TEXT
        from .codec.reasons import text

        return text(key, values, TEXT)
    except MemoryError:  # no room for the table: the key still says what broke
        return key

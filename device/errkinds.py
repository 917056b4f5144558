# The exceptions a caller may need to tell apart, by kind of failure (see errors.py: they
# load with the first one raised, or when a program names one).
from . import MQTTException


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

# The exceptions a caller may need to tell apart, by kind of failure (see errors.py: they
# load with the first one raised, or when a program names one).
from . import MQTTException


class ConnectRefused(MQTTException):
    """CONNACK refused the connection: args[0] is the return code (as in umqtt.simple's
    MQTTException; MQTT 5's reason code), args[1] says what it means."""

    def __str__(self):
        return self.args[1]


class Timeout(MQTTException):
    """A blocking call ran out of `timeout`; what it started goes on (a message stays queued)."""


class NotConnected(MQTTException):
    """The call needs a connection and there is none (connect(), or reconnect=True)."""


class SubscribeRefused(MQTTException):
    """The broker refused the subscription (SUBACK 0x80); in MQTT 5 args[1] is SUBACK's
    reason code."""

    def __str__(self):
        return self.args[0]


class QueueFull(MQTTException):
    """queue_size messages are accepted and not yet complete; loop() until one completes."""


class ProtocolError(MQTTException):
    """The broker broke MQTT (3.1.1, or 5 with fleetwire.v5); the connection is closed."""


class Disconnected(MQTTException):
    """MQTT 5: the broker ended the connection with DISCONNECT: args[0] is its reason code,
    args[1] says it (the reason's name and the broker's reason string)."""

    __str__ = ConnectRefused.__str__


class PublishRefused(MQTTException):
    """MQTT 5: the broker refused a QoS 1/2 message (PUBACK or PUBREC with a reason code of
    0x80 or more): args[0] is the code, args[1] says it. The message is done with."""

    __str__ = ConnectRefused.__str__

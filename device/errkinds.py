# The exceptions a caller may need to tell apart, by kind of failure (see errors.py: they
# load with the first one raised, or when a program names one).
from . import MQTTException


class _Coded(MQTTException):
    # args[0] a code, args[1] what it means
    def __str__(self):
        return self.args[1]


class ConnectRefused(_Coded):
    """CONNACK refused the connection: args[0] is the return code (as in umqtt.simple's
    MQTTException; MQTT 5's reason code), args[1] says what it means."""


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
    """The broker broke MQTT 3.1.1; the connection is closed."""


class Disconnected(_Coded):
    """MQTT 5: the broker ended the connection with DISCONNECT: args[0] is its reason code,
    args[1] says it (the reason's name and the broker's reason string)."""


class PublishRefused(_Coded):
    """MQTT 5: the broker refused a QoS 1/2 message (PUBACK or PUBREC with a reason code of
    0x80 or more): args[0] is the code, args[1] says it. The message is done with."""

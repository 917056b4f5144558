# MQTT 5's error classes (fleetwire.v5.Disconnected, fleetwire.v5.PublishRefused), loaded with
# the first one raised or named: beside errkinds.py, which a 3.1.1 program loads with its
# first error and which holds nothing of MQTT 5's.
from . import MQTTException


class Disconnected(MQTTException):
    """The broker ended the connection with DISCONNECT: args[0] is its reason code, args[1]
    says it (the reason's name and the broker's Reason String)."""

    def __str__(self):
        return self.args[1]


class PublishRefused(MQTTException):
    """The broker refused a QoS 1/2 message (PUBACK or PUBREC with a reason code of 0x80 or
    more): args[0] is the code, args[1] says it. The message is done with."""

    __str__ = Disconnected.__str__

# fleetwire's errors. A caller that must act differently on a failure tells it by its class;
# the text says what happened and what to do. MQTTException, the base, and say(), which
# words them all, live in the package (every client module needs them); the other classes
# (errkinds.py) load with the first error that needs one, or when a program names one here
# (fleetwire.errors.Timeout): a program that never fails never pays for them. The texts live
# in reasons.py and are read only when an error is raised, so they cost a board no RAM
# until then (a class costs about 110 bytes on a 32-bit board).
from . import MQTTException, say  # noqa: F401


def __getattr__(name):
    from . import errkinds

    v = globals()[name] = getattr(errkinds, name)
    return v

# fleetwire's base exception, and say(), which words them all. A caller that must act
# differently on a failure tells it by its class (errkinds.py, loaded with the first
# error: fleetwire.errors.Timeout and the like find it); the text says what happened and
# what to do. The texts live in reasons.py and are read only when an error is raised, so
# they cost a board no RAM until then (a class costs about 110 bytes on a 32-bit board).


class MQTTException(Exception):
    """Base of fleetwire's errors."""


def __getattr__(name):
    # The other classes (errkinds.py) load with the first error that needs one, or when a
    # program names one: a program that never fails never pays for them.
    from . import errkinds

    v = globals()[name] = getattr(errkinds, name)
    return v


def say(key, *values):
    """The text of error `key` (fleetwire.reasons, loaded now, not at import)."""
    try:
        from .reasons import TEXT
        from .codec.reasons import text

        return text(key, values, TEXT)
    except MemoryError:  # no room for the table: the key still says what broke
        return key

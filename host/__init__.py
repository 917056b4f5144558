"""fleetwire.host: the CPython side, one subpackage per job (see tests/test_layout.py for the
groups and the order in which they may use each other)."""


class Missing(RuntimeError):
    """Something fleetwire needs on the host is not installed (a broker, the MicroPython unix
    port, Java); the message says how to install it. The CLI prints it in one line (exit 2)."""

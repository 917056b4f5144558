# Runs the test_* functions of a portable test module on whichever Python runs
# this file (MicroPython's unix port or CPython), one line per test:
# "PASS name" or "FAIL name: why", then "N passed, M failed".
#   micropython run.py MODULE      (MODULE importable from MICROPYPATH / sys.path)
# It also holds what the case modules share (they import it by its bare name, as
# MicroPython finds it beside them).
import sys


def raises(exc, f, *a):
    """f(*a) must raise exc -> the exception."""
    try:
        f(*a)
    except exc as e:
        return e
    raise AssertionError("%s not raised" % exc.__name__)


def main(modname):
    mod = __import__(modname)
    names = sorted(n for n in dir(mod) if n.startswith("test_"))
    passed = failed = 0
    for n in names:
        try:
            getattr(mod, n)()
        except Exception as e:
            failed += 1
            print("FAIL %s: %s: %s" % (n, type(e).__name__, e))
        else:
            passed += 1
            print("PASS " + n)
    print("%d passed, %d failed" % (passed, failed))
    return failed


if __name__ == "__main__":
    sys.exit(1 if main(sys.argv[1]) else 0)

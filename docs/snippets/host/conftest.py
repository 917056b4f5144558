# conftest.py: the HIL fixtures (a real board with --board PORT, else a virtual board) and the
# broker fixtures they stand on
pytest_plugins = ["fleetwire.host.testing.pytest_plugin", "fleetwire.host.testing.hil"]

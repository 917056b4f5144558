"""The device fixtures (tests/agents.py): `interp` runs each test on MicroPython
(80 KB heap) and on CPython; `device(client_id)` starts the agent program."""

from agents import interp, device, front, agent_lib  # noqa: F401

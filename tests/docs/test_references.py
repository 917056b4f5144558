"""The reference pages name everything the code has: every option, event and error class of
the client, every key of config.json the board reads, every field of the telemetry record;
and the data files the pages show are what the tools accept."""

import glob
import inspect
import json
import os
import re

import pytest

from examples import SNIPPETS, snippet
from support import ROOT


def page(name):
    with open(os.path.join(ROOT, "docs", name), encoding="utf-8") as f:
        return f.read()


def first_column(text, header):
    """The names in backticks in the first column of the table whose header row is `header`."""
    rows = []
    for line in text.split(header, 1)[1].splitlines()[1:]:
        if not line.startswith("|"):
            break
        rows.append(line.split("|")[1])
    return {name for cell in rows[1:] for name in re.findall(r"`([^`]+)`", cell)}


def test_the_client_reference_names_every_constructor_argument_and_option():
    from fleetwire.aio import AsyncClient
    from fleetwire.client import MQTTClient
    from fleetwire.session import Session

    text = page("reference/client.md")
    params = set()
    for f in (Session.__init__, MQTTClient.__init__, AsyncClient.__init__):
        params |= {
            p for p in inspect.signature(f).parameters if p not in ("self", "options", "clean_session")
        }
    assert sorted(p for p in params if "`%s`" % p not in text) == []


def test_the_client_reference_names_every_call_event_and_error_class():
    import fleetwire.errkinds as errkinds
    import fleetwire.tls.errors as tlserrors
    from fleetwire import MQTTException
    from fleetwire.aio import AsyncClient
    from fleetwire.client import MQTTClient
    from fleetwire.session import Session

    text = page("reference/client.md")
    events = [n for n in vars(Session) if n.startswith("on_")]
    assert events and [e for e in events if "`%s`" % e not in text] == []
    io_loop = {
        "start",
        "lost",
        "rx",
        "received",
        "room",
        "pack",
        "tick",
        "pack_qos0",
        "need_qos2",
        "forget",
        "sub_result",
    }
    for cls in (MQTTClient, AsyncClient):
        calls = [n for n, v in vars(cls).items() if callable(v) and not n.startswith("_")]
        assert [c for c in calls if "`%s(" % c not in text and "`await %s(" % c not in text] == [], cls
    session_calls = [n for n, v in vars(Session).items() if inspect.isfunction(v) and not n.startswith("_")]
    assert [c for c in session_calls if c not in io_loop and "`%s(" % c not in text] == []
    classes = [
        c
        for m in (errkinds, tlserrors)
        for c in vars(m).values()
        if inspect.isclass(c) and issubclass(c, (MQTTException, OSError)) and c.__module__ == m.__name__
    ]
    from fleetwire.reconnect import SessionTakenOver
    from fleetwire.store import StoreFull

    classes += [StoreFull, SessionTakenOver]
    assert [c.__name__ for c in classes if c.__name__ not in text] == []


def keys_the_board_reads():
    keys = set()
    for folder in ("device", "firmware"):
        for path in glob.glob(os.path.join(ROOT, folder, "**", "*.py"), recursive=True):
            with open(path, encoding="utf-8") as f:
                keys |= set(re.findall(r'\bcfg(?:\.get\(|\[)"(\w+)"', f.read()))
    return keys


def test_the_config_reference_names_every_key_the_board_reads():
    keys = keys_the_board_reads()
    assert {"device_id", "broker", "ota_window", "tls_issuer"} <= keys  # the scan finds them
    documented = first_column(page("reference/config.md"), "| key | default | what |")
    assert sorted(keys - documented) == []
    assert sorted(documented - keys) == []


@pytest.mark.parametrize(
    "name", ["files/device.json", "files/device_tls.json", "files/device_renew.json", "files/aws_iot.json"]
)
def test_the_config_examples_are_configs_deploy_accepts_with_documented_keys(name, tmp_path):
    from fleetwire.host.rig.deploy import load_config

    path = tmp_path / "device.json"
    path.write_text(snippet(name))
    cfg = load_config(str(path))
    assert cfg == json.loads(snippet(name))
    assert set(cfg) <= keys_the_board_reads()


def test_the_tables_reference_lists_the_record_as_the_collector_lands_it():
    from fleetwire.host.fleet.record import FIELD_NAMES, REQUIRED

    text = page("reference/tables.md")
    documented = first_column(text, "| field | type | what |")
    assert sorted(documented) == sorted(FIELD_NAMES)
    required = re.findall(r"^\| `(\w+)` \| \w+ \| [^|]*\(required\) \|$", text, re.M)
    assert sorted(required) == sorted(REQUIRED)


def test_the_tables_reference_has_a_section_per_table_the_job_writes():
    from fleetwire.host.analytics.schema import TABLES

    text = page("reference/tables.md")
    assert re.findall(r"^## `(\w+)`$", text, re.M) == TABLES


def test_the_proxy_script_example_parses():
    from fleetwire.host.testing.proxyscript import parse_script

    steps = parse_script(snippet("files/chaos.txt"))
    assert [s[1] for s in steps] == ["wait", "cut", "wait", "blackhole", "wait", "blackhole", "repeat"]


def test_the_hil_example_commands_use_options_the_hil_plugin_has():
    import argparse

    from fleetwire.host.testing import hil

    class Group:
        def __init__(self):
            self.options = []

        def addoption(self, *names, **kw):
            self.options += names

    class Parser:
        group = Group()

        def getgroup(self, name):
            return self.group

    parser = Parser()
    hil.pytest_addoption(parser)
    used = set(re.findall(r"(--board[\w-]*)", snippet("shell/hil.sh")))
    assert used and used <= set(parser.group.options)
    assert argparse  # (the options are pytest's, not argparse's)


def test_the_hil_conftest_loads_the_plugins_the_suite_loads():
    import ast

    def plugins(source):
        for node in ast.parse(source).body:
            if isinstance(node, ast.Assign) and node.targets[0].id == "pytest_plugins":
                return ast.literal_eval(node.value)

    with open(os.path.join(ROOT, "tests", "conftest.py"), encoding="utf-8") as f:
        suite = plugins(f.read())
    assert suite and plugins(snippet("host/conftest.py")) == suite


def test_the_snippets_folder_holds_no_stray_files():
    assert not glob.glob(os.path.join(SNIPPETS, "**", "*.pyc"), recursive=True)

"""The documentation site builds strictly (`mkdocs build --strict`, mkdocs.yml): a broken
link or anchor, a page missing from the navigation, a mkdocstrings reference to a symbol that
no longer exists, or a check of docs/hooks/fleetwire_docs.py (a code block that is not a
snippet; a dotted name, repository path, test or CLI option in inline code that no longer
exists) fails the build, and so this test. No broker, Spark or board: the fast tier."""

import importlib.util
import os
import subprocess
import sys

import pytest

from support import ROOT

HOOK = os.path.join(ROOT, "docs", "hooks", "fleetwire_docs.py")


def hook():
    spec = importlib.util.spec_from_file_location("fleetwire_docs", HOOK)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def test_the_site_builds_strictly(tmp_path):
    site = tmp_path / "site"
    r = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    for page in (
        "index.html",
        "reference/cli/index.html",
        "reference/client/index.html",
        "design/store/index.html",
    ):
        assert (site / page).exists(), page
    cli = (site / "reference" / "cli" / "index.html").read_text()
    assert "fleetwire rollout" in cli and "--max-crash-free-drop" in cli
    client = (site / "reference" / "client" / "index.html").read_text()
    assert "SessionTakenOver" in client and "CertificateRevoked" in client  # drawn from the code
    assert not (site / "snippets").exists() and not (site / "hooks").exists()


def test_the_cli_reference_has_every_command_and_option_of_the_parser():
    from fleetwire.tools import cli

    page = hook().cli_reference()
    parser, _ = cli.parser(only=True)
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    for name, p in sub.choices.items():
        assert "## `fleetwire %s`" % name in page
        for a in p._actions:
            for opt in a.option_strings:
                if opt not in ("-h", "--help") and a.help != "==SUPPRESS==":
                    assert "`%s`" % opt in page, (name, opt)


@pytest.mark.parametrize(
    "markdown,problem",
    [
        ('```python\nprint("inline")\n```\n', "a code block is not a snippet"),
        ("`fleetwire.session.NoSuchThing`", "names nothing that exists"),
        ("`fleetwire.nosuchmodule.X`", "names nothing that exists"),
        ("`device/nosuchfile.py`", "no such file or folder"),
        ("`test_nothing_is_named_this`", "no such test"),
        ("`fleetwire report --no-such-option`", "has no option --no-such-option"),
        ("`fleetwire nosuchcommand`", "has no command"),
    ],
)
def test_the_checks_catch_what_has_rotted(markdown, problem):
    found = hook().problems(markdown)
    assert len(found) == 1 and problem in found[0], found


def test_the_checks_pass_what_exists():
    md = (
        '```python\n--8<-- "device/first_client.py"\n```\n'
        "`fleetwire.session.Session`, `fleetwire.codec.errors.rule(e)`, `device/ring/store.py`, "
        "`test_hot_path_allocates_nothing`, `test_a_power_cut_...`, `fleetwire flash --no-stub --port P`"
    )
    assert hook().problems(md) == []

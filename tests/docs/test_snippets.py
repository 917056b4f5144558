"""Every code example of the documentation is a file under docs/snippets/ that a page
includes and a test runs (or, for what needs hardware or a cluster, checks against the real
command's own argument definitions); the README's code blocks are copies of such files."""

import glob
import os
import re
import shlex

import pytest

from examples import SNIPPETS, command_lines, includes, snippet, snippet_files
from support import ROOT

# Files of the repository that a page includes as they are, each read by tests of its own.
REPOSITORY_FILES = {"firmware/partitions-mqtt.csv": "tests/rig/test_partitions.py"}
# Shell examples that need what a test cannot have: each is checked, not run, by
# test_every_fleetwire_command_of_a_shell_example_parses_with_its_own_parser; why not run:
CHECKED_ONLY = {
    "shell/two_commands.sh": "the suite itself, and the demo (.ci/run; tests/fleet/test_demo.py)",
    "shell/identity_run.sh": "a broker on every interface; tests/identity/ deploys with --ca, revokes",
    "shell/aws_iot.sh": "certificates from AWS; tests/identity/ deploys with --cert, --key and --broker-ca",
    "shell/hil.sh": "a real board; its options are checked against the plugin in test_references.py",
}


def text_of_tests():
    text = ""
    for path in glob.glob(os.path.join(ROOT, "tests", "**", "*.py"), recursive=True):
        with open(path, encoding="utf-8") as f:
            text += f.read()
    return text


def readme_blocks():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        return re.findall(r"^```[^\n]*\n(.*?)^```$", f.read(), re.M | re.S)


def test_every_snippet_is_included_by_a_page_or_copied_into_the_readme():
    used = set(includes())
    copied = {name for name in snippet_files() if snippet(name) in readme_blocks()}
    assert [name for name in snippet_files() if name not in used | copied] == []


def test_a_page_includes_only_snippets_and_files_that_tests_read():
    for name, pages in includes().items():
        if name in REPOSITORY_FILES:
            assert os.path.exists(os.path.join(ROOT, name)) and os.path.exists(
                os.path.join(ROOT, REPOSITORY_FILES[name])
            )
        else:
            assert os.path.exists(os.path.join(SNIPPETS, name)), (name, pages)


def test_every_snippet_is_named_by_a_test_that_runs_or_checks_it():
    text = text_of_tests()
    assert [name for name in snippet_files() if '"%s"' % name not in text] == []


def test_every_code_block_of_the_readme_is_a_snippet():
    snippets = {snippet(name) for name in snippet_files()}
    blocks = readme_blocks()
    assert blocks, "the README has its two commands in a code block"
    assert [b for b in blocks if b not in snippets] == []


def test_the_readmes_two_commands_are_the_ones_ci_and_the_runner_know():
    assert command_lines("shell/two_commands.sh") == ["bash tools/run.sh demo", "bash tools/run.sh test"]
    with open(os.path.join(ROOT, ".ci", "run"), encoding="utf-8") as f:
        assert "exec bash tools/run.sh test\n" in f.read()
    with open(os.path.join(ROOT, "tools", "run.sh"), encoding="utf-8") as f:
        run = f.read()
    assert "\n    test)\n" in run and "\n    demo)\n" in run


SHELL = sorted(n for n in snippet_files() if n.endswith(".sh"))
# What a shell example's variables stand for, when its commands are only checked.
VALUES = {"$PORT": "/dev/ttyUSB0", "$FIRMWARE": "fw.bin"}


@pytest.mark.parametrize("name", SHELL)
def test_every_fleetwire_command_of_a_shell_example_parses_with_its_own_parser(name):
    from fleetwire.tools import cli

    for line in command_lines(name):
        for k, v in VALUES.items():
            line = line.replace('"%s"' % k, v).replace(k, v)
        words = shlex.split(line.rstrip("&").strip())
        if words[0] != "fleetwire":
            continue
        parser, _ = cli.parser(only=words[1])
        try:
            parser.parse_args(words[1:])
        except SystemExit:
            pytest.fail("%s: `%s` does not parse" % (name, line))

"""MkDocs hooks of fleetwire's documentation (mkdocs.yml `hooks:`).

- The CLI reference, `reference/cli.md`, is generated at every build from the `fleetwire`
  command's own argparse definitions (`fleetwire.tools.cli.parser(only=True)`): it cannot
  drift from the code.
- mkdocstrings finds the package as it is installed: `fleetwire` is device/, but
  `fleetwire.codec` is shared/ and `fleetwire.host` is host/ (setup.py maps them), which a
  static loader looking inside device/ would not find. The build gives it a tree of links
  laid out as the package is imported.
- Every page is checked, and in a strict build (`mkdocs build --strict`, as the tests run
  it) a failed check fails the build:
  - a code block holds only snippet lines (`--8<-- "..."`): every example is a file under
    docs/snippets/, which the tests run;
  - a dotted name `fleetwire.x.y` in inline code imports and resolves;
  - a repository path in inline code (`device/session.py`, `bench/heap.py`) exists;
  - a test named in inline code (`test_...`) is defined under tests/;
  - `fleetwire COMMAND --option` in inline code names a command and its options.
"""

import argparse
import glob
import importlib
import logging
import os
import re
import shutil
import tempfile

from mkdocs.plugins import event_priority
from mkdocs.structure.files import File

log = logging.getLogger("mkdocs.plugins.fleetwire")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLI_PAGE = "reference/cli.md"
# setup.py's ROOTS: import name -> folder
PACKAGES = {
    "fleetwire": "device",
    "fleetwire.codec": "shared",
    "fleetwire.host": "host",
    "fleetwire.tools": "tools",
    "fleetwire.firmware": "firmware",
}
REPO_DIRS = ("device", "shared", "host", "tools", "tests", "bench", "firmware", "docs")

_tree = None


# ---- the package as it is imported, for mkdocstrings


def package_tree():
    """A temporary directory holding `fleetwire/` as Python imports it: links to device/'s
    files, with codec/, host/, tools/ and firmware/ linked to their folders."""
    global _tree
    if _tree is None:
        _tree = tempfile.mkdtemp(prefix="fleetwire-docs-")
        top = os.path.join(_tree, "fleetwire")
        os.mkdir(top)
        for name in os.listdir(os.path.join(ROOT, "device")):
            src = os.path.join(ROOT, "device", name)
            if name == "__pycache__":
                continue
            if os.path.isdir(src) and not os.path.exists(os.path.join(src, "__init__.py")):
                # a device family (ota/, tls/, ring/): a folder without __init__ on a board,
                # which a static loader does not take for a package; an empty one here
                os.mkdir(os.path.join(top, name))
                open(os.path.join(top, name, "__init__.py"), "w").close()
                for f in os.listdir(src):
                    if f.endswith(".py"):
                        os.symlink(os.path.join(src, f), os.path.join(top, name, f))
            else:
                os.symlink(src, os.path.join(top, name))
        for pkg, folder in PACKAGES.items():
            if pkg != "fleetwire":
                os.symlink(os.path.join(ROOT, folder), os.path.join(top, pkg.split(".", 1)[1]))
    return _tree


@event_priority(100)  # before mkdocstrings loads anything
def on_config(config):
    handlers = config.plugins["mkdocstrings"].config.handlers
    handlers.setdefault("python", {})["paths"] = [package_tree()]
    return config


def on_shutdown():
    global _tree
    if _tree is not None:
        shutil.rmtree(_tree, ignore_errors=True)
        _tree = None


# ---- the CLI reference, from argparse


def _sub_actions(parser):
    return [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]


def _default(action):
    d = action.default
    if d in (None, False, argparse.SUPPRESS) or action.required or isinstance(action, argparse._HelpAction):
        return ""
    if isinstance(d, list) and not d:
        return ""
    return "`%s`" % (d,)


def _cell(text):
    return " ".join((text or "").split()).replace("|", "\\|")


def _options_table(parser):
    rows = []
    for a in parser._actions:
        if isinstance(a, (argparse._HelpAction, argparse._SubParsersAction)) or a.help == argparse.SUPPRESS:
            continue
        if a.option_strings:
            name = ", ".join("`%s`" % s for s in a.option_strings)
            if a.nargs != 0:
                metavar = a.metavar or (a.dest.upper() if not a.choices else "{%s}" % ",".join(a.choices))
                name += " `%s`" % metavar
        else:
            name = "`%s`" % (a.metavar or a.dest)
        help_ = a.help or ""
        if a.default not in (None, argparse.SUPPRESS):
            help_ = help_.replace("%(default)s", str(a.default))
        rows.append("| %s | %s | %s | %s |" % (name, "yes" if a.required else "", _default(a), _cell(help_)))
    if not rows:
        return ""
    return "| option | required | default | what |\n| --- | --- | --- | --- |\n" + "\n".join(rows) + "\n"


def _command(parser, title, level):
    out = ["%s `%s`\n" % ("#" * level, title)]
    usage = parser.format_usage().strip()
    if usage.startswith("usage: "):
        usage = usage[len("usage: ") :]
    out.append("```text\n%s\n```\n" % usage)
    if parser.description:
        out.append("```text\n%s\n```\n" % parser.description.strip("\n"))
    out.append(_options_table(parser))
    for sub in _sub_actions(parser):
        for name, sp in sub.choices.items():
            out.append(_command(sp, "%s %s" % (title, name), level + 1))
    return "\n".join(out)


def cli_reference():
    """reference/cli.md: every command of `fleetwire`, its usage, description and options,
    from the parser the command itself runs with."""
    from fleetwire.tools import cli

    parser, _ = cli.parser(only=True)
    columns = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"  # argparse wraps usage lines to the terminal: the same on every build
    try:
        return _cli_page(cli, parser)
    finally:
        if columns is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = columns


def _cli_page(cli, parser):
    out = [
        "# The `fleetwire` command\n",
        "Generated from the command's own argument definitions (`fleetwire.tools.cli.COMMANDS` "
        "and each command's `add_arguments`) at every build of these pages. "
        "`fleetwire COMMAND --help` prints the same.\n",
        "| command | extra it needs | what |\n| --- | --- | --- |",
    ]
    for name, (_, extra, help_) in cli.COMMANDS.items():
        anchor = "fleetwire-" + name
        out.append(
            "| [`%s`](#%s) | %s | %s |" % (name, anchor, "`%s`" % extra if extra else "none", _cell(help_))
        )
    out.append(
        "\nA command whose extra is not installed says which to install (exit 2): "
        "`pip install 'fleetwire[EXTRA]'`.\n"
    )
    for sub in _sub_actions(parser):
        for name, sp in sub.choices.items():
            out.append(_command(sp, "fleetwire " + name, 2))
    return "\n".join(out)


def on_files(files, config):
    files.append(File.generated(config, CLI_PAGE, content=cli_reference()))
    return files


# ---- checks of every page

_FENCE = re.compile(
    r"^(?P<indent> *)(?P<fence>```+|~~~+)[^\n]*\n(?P<body>.*?)^(?P=indent)(?P=fence)[ \t]*$", re.M | re.S
)
_SNIPPET_LINE = re.compile(r'^\s*--8<-- "[^"]+"\s*$')
_INLINE = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
_DOTTED = re.compile(r"^(fleetwire(?:\.[A-Za-z_]\w*)+)")
_PATH = re.compile(r"^(?:%s)/[\w./*-]*$" % "|".join(REPO_DIRS))
_TEST = re.compile(r"^(test_\w+?)(_?\.\.\.)?$")
_COMMAND = re.compile(r"^fleetwire ([a-z][a-z-]*)(.*)$")


def resolve(dotted):
    """The object a dotted name names: the longest importable module, then attributes."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ModuleNotFoundError as e:
            if e.name and ".".join(parts[:i]).startswith(e.name) and e.name.startswith("fleetwire"):
                continue
            raise
        for p in parts[i:]:
            obj = getattr(obj, p)
        return obj
    raise ModuleNotFoundError(dotted)


_test_names = None


def test_names():
    global _test_names
    if _test_names is None:
        names = set()
        for path in glob.glob(os.path.join(ROOT, "tests", "**", "*.py"), recursive=True):
            with open(path, encoding="utf-8") as f:
                names |= set(re.findall(r"^\s*(?:async )?def (test_\w+)", f.read(), re.M))
        _test_names = names
    return _test_names


_options = {}


def command_options(name):
    """The option strings of `fleetwire NAME` and of its subcommands, or None if no such command."""
    if name not in _options:
        from fleetwire.tools import cli

        if name not in cli.COMMANDS:
            _options[name] = None
        else:
            parser, _ = cli.parser(only=name)
            found = set()
            todo = [p for s in _sub_actions(parser) for n, p in s.choices.items() if n == name]
            while todo:
                p = todo.pop()
                for a in p._actions:
                    found |= set(a.option_strings)
                    if isinstance(a, argparse._SubParsersAction):
                        todo += list(a.choices.values())
            _options[name] = found
    return _options[name]


def problems(markdown):
    """What is wrong with a page's markdown source: a list of sentences."""
    out = []
    for m in _FENCE.finditer(markdown):
        lines = [line for line in m.group("body").splitlines() if line.strip()]
        if not lines or not all(_SNIPPET_LINE.match(line) for line in lines):
            first = (lines or [""])[0].strip()
            out.append("a code block is not a snippet from docs/snippets/ (it starts %r)" % first[:60])
    prose = _FENCE.sub("", markdown)
    for m in _INLINE.finditer(prose):
        code = m.group(1).strip()
        d = _DOTTED.match(code)
        if d:
            try:
                resolve(d.group(1))
            except (ImportError, AttributeError) as e:
                out.append("`%s` names nothing that exists (%s: %s)" % (d.group(1), type(e).__name__, e))
        if _PATH.match(code) and not glob.glob(os.path.join(ROOT, code)):
            out.append("`%s`: no such file or folder in the repository" % code)
        t = _TEST.match(code)
        if t:
            name, prefix = t.group(1), t.group(2)
            names = test_names()
            if not (any(n.startswith(name) for n in names) if prefix else name in names):
                out.append("`%s`: no such test under tests/" % code)
        c = _COMMAND.match(code)
        if c:
            opts = command_options(c.group(1))
            if opts is None:
                out.append("`%s`: fleetwire has no command %r" % (code, c.group(1)))
            else:
                for opt in re.findall(r"(?<![\w-])(--[a-z][\w-]*)", c.group(2)):
                    if opt not in opts:
                        out.append("`%s`: fleetwire %s has no option %s" % (code, c.group(1), opt))
    return out


def on_page_markdown(markdown, page, config, files):
    if page.file.src_uri != CLI_PAGE:  # generated from the parser: its blocks are no examples
        for p in problems(markdown):
            log.warning("%s: %s", page.file.src_uri, p)
    return markdown

"""The `fleetwire` command. Each subcommand is a module in this package with
HELP (one line), add_arguments(parser) and run(args) -> exit code."""

import argparse
import importlib
import sys

# Subcommand name -> module in fleetwire.tools. Add a line to add a command.
COMMANDS = {
    "build": "build",
    "selfcheck": "selfcheck",
    "demo": "demo",
    "gen-telemetry": "gen_telemetry",
    "report": "report",
    "proxy": "proxy",
    "collect": "collect",
    "sim": "sim",
    "vboard": "vboard",
    "deploy": "deploy",
    "console": "console",
    "flash": "flash",
    "statements": "statements",
    "ca": "ca",
    "broker-config": "broker_config",
    "bundle": "bundle",
    "rollout": "rollout",
}


def parser():
    p = argparse.ArgumentParser(
        prog="fleetwire",
        description="fleetwire: an MQTT stack for MicroPython fleets. "
        "Run `fleetwire COMMAND --help` for the options of one command.",
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    mods = {}
    for name, mod in COMMANDS.items():
        m = importlib.import_module("fleetwire.tools." + mod)
        sp = sub.add_parser(
            name,
            help=m.HELP,
            description=(m.__doc__ or m.HELP).strip(),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        m.add_arguments(sp)
        mods[name] = m
    return p, mods


def main(argv=None):
    p, mods = parser()
    args = p.parse_args(argv)
    if not args.command:
        p.print_help()
        return 2
    try:
        return mods[args.command].run(args) or 0
    except KeyboardInterrupt:
        print("fleetwire: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

"""The `fleetwire` command. Each subcommand is a module in this package with
add_arguments(parser) and run(args) -> exit code, its docstring the command's description;
COMMANDS below names it and says what it does in one line.

A command's module is imported only when that command runs, so `fleetwire --help` works on
a bare install; a command whose extra is not installed says in one line which extra to
install (exit 2)."""

import argparse
import importlib
import sys

from fleetwire.host import Missing

# Subcommand name -> (module in fleetwire.tools, the extra it needs or None, one line of help).
# Add a line to add a command.
COMMANDS = {
    "build": ("build", None, "write the board tree DIR/lib/fleetwire from device/ + shared/"),
    "selfcheck": ("selfcheck", "rig", "run the codec test vectors on MicroPython and CPython"),
    "demo": (
        "demo",
        "all",
        "the fleet demo: broker, simulated fleet, collector and the Spark report, in one go",
    ),
    "gen-telemetry": (
        "gen_telemetry",
        "spark",
        "write a synthetic telemetry landing zone (for `fleetwire report`)",
    ),
    "report": (
        "report",
        "spark",
        "build the fleet analytics tables and report.html from a telemetry landing zone (Spark)",
    ),
    "proxy": (
        "proxy",
        None,
        "a fault-injecting MQTT proxy (cut, delay, throttle, blackhole, refuse, corrupt)",
    ),
    "collect": (
        "collect",
        "rig",
        "land fleet telemetry from the broker as hourly NDJSON files (for `fleetwire report`)",
    ),
    "sim": (
        "sim",
        "rig",
        "run a simulated fleet of devices (fleetwire's client and vitals agent) against a broker",
    ),
    "vboard": (
        "vboard",
        "rig",
        "start virtual boards (MicroPython unix port behind a pty) for mpremote, pyserial and HIL tests",
    ),
    "deploy": (
        "deploy",
        "rig",
        "deploy fleetwire, boot.py/main.py and config.json to a board, copying only what changed",
    ),
    "console": (
        "console",
        "rig",
        "a serial console that survives resets: timestamps, log file, stop on a pattern",
    ),
    "flash": (
        "flash",
        "rig",
        "flash MicroPython firmware to one or many ESP32 boards (esptool), with clear errors",
    ),
    "statements": ("statements", None, "which MQTT 3.1.1 client statements have a test (run in a checkout)"),
    "ca": ("ca", "rig", "the fleet CA: init, issue certificates for host tools, revoke, list"),
    "release": (
        "release",
        "rig",
        "the fleet's release-signing keys: init, rotate, retire, list, publish a key update",
    ),
    "broker-config": (
        "broker_config",
        "rig",
        "write a mosquitto configuration that enforces fleet identity (mutual TLS, ACL, CRL)",
    ),
    "cmd": (
        "cmd",
        "rig",
        "send a command to boards (one, a group or a share of the fleet) and wait for the answers",
    ),
    "state": ("state", "rig", "get and set boards' desired state, and show drift"),
    "bundle": ("bundle", "rig", "build an app bundle (board tree + app) for over-the-air updates"),
    "rollout": (
        "rollout",
        "all",
        "roll a release out to a fleet in stages, with the Spark report as the gate between them",
    ),
}


class MissingExtra(Exception):
    """A command needs a package that an extra of fleetwire installs."""


def load(name):
    """The module of command `name`; MissingExtra if a package it needs is not installed."""
    try:
        return importlib.import_module("fleetwire.tools." + COMMANDS[name][0])
    except ModuleNotFoundError as e:
        top = (e.name or "").split(".")[0]
        if not top or top == "fleetwire":
            raise
        raise MissingExtra(missing(name, top))


def missing(command, module):
    """The one line that says a command misses `module` and which extra to install."""
    extra = COMMANDS[command][1]
    if extra is None:
        return "fleetwire %s needs %s, which is not installed: pip install %s" % (command, module, module)
    return "fleetwire %s needs the %s extra (%s is not installed): pip install 'fleetwire[%s]'" % (
        command,
        extra,
        module,
        extra,
    )


def parser(only=None):
    """The argument parser: every command listed; the options of `only` (a command name), or
    of every command with only=True (importing them all, as the docs do)."""
    p = argparse.ArgumentParser(
        prog="fleetwire",
        description="fleetwire: an MQTT stack for MicroPython fleets. "
        "Run `fleetwire COMMAND --help` for the options of one command.",
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    mods = {}
    for name, (_, _, help_) in COMMANDS.items():
        if only is True or only == name:
            m = mods[name] = load(name)
            sp = sub.add_parser(
                name,
                help=help_,
                description=(m.__doc__ or help_).strip(),
                formatter_class=argparse.RawDescriptionHelpFormatter,
            )
            m.add_arguments(sp)
        else:
            sub.add_parser(name, help=help_, add_help=False)
    return p, mods


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    name = next((a for a in argv if not a.startswith("-")), None)
    try:
        p, mods = parser(name if name in COMMANDS else None)
    except MissingExtra as e:
        print("fleetwire: %s" % e, file=sys.stderr)
        return 2
    args = p.parse_args(argv)
    if not args.command:
        p.print_help()
        return 2
    try:
        return mods[args.command].run(args) or 0
    except ModuleNotFoundError as e:  # a module the command imports as it runs
        top = (e.name or "").split(".")[0]
        if not top or top == "fleetwire":
            raise
        print("fleetwire: %s" % missing(args.command, top), file=sys.stderr)
        return 2
    except Missing as e:  # a program it needs (a broker, the unix port): the message says how
        print("fleetwire %s: %s" % (args.command, e), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("fleetwire: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

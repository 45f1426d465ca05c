#!/usr/bin/env bash
# Set up everything `make demo` / `make test` need on a fresh Debian machine:
# system packages (installed with apt-get when running as root, otherwise the exact command is printed)
# and the project's virtualenv in .venv. Idempotent and quick when nothing is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

PKGS="gcc make clang libclang-rt-dev libcmocka-dev cppcheck valgrind gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm chromium"
missing=""
for p in $PKGS; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing="$missing $p"
  fi
done
if [ -n "$missing" ]; then
  if [ "$(id -u)" = "0" ]; then
    echo "utvm: installing system packages:$missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # shellcheck disable=SC2086
    apt-get install -y -qq $missing >/dev/null
  else
    echo "utvm: missing system packages:$missing" >&2
    echo "utvm: install them with:  sudo apt-get install -y$missing" >&2
    exit 1
  fi
fi

PY="${PYTHON:-python3}"
if ! "$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)'; then
  echo "utvm: Python >= 3.11 is required ($PY is $("$PY" --version 2>&1))" >&2
  exit 1
fi
if [ ! -x .venv/bin/python ]; then
  echo "utvm: creating .venv"
  "$PY" -m venv .venv
fi
stamp=.venv/.utvm-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ tools/bootstrap.sh -nt "$stamp" ]; then
  echo "utvm: installing the package and its test dependencies into .venv"
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -e '.[test,tune,distributed]'
  touch "$stamp"
fi

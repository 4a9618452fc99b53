#!/usr/bin/env bash
# Installs everything the test suite needs on a fresh machine, then runs the whole suite.
# Needs root (or sudo) only for Debian's chromium, used by the real-browser approval test.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v chromium >/dev/null 2>&1; then
  sudo_cmd=""; [ "$(id -u)" = 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq chromium >/dev/null
fi

python -m pip install -q --disable-pip-version-check -e '.[test]'
# An editable install is never byte-compiled, and PYTHONDONTWRITEBYTECODE may forbid it later:
# compile once so import-time checks measure imports, not the compiler.
python -m compileall -q bettong_nb >/dev/null
bash .ci/install-llama.sh
# The notebook extension shipped in the package must be what frontend/ builds (about a minute).
bash scripts/check_labextension.sh

python -m pytest "$@"

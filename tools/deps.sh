#!/bin/sh
# What the tests need, installed where missing: Debian's packages (apt-get,
# as root) and the pinned npm packages of tests/js (npm ci). Without root and
# with a package missing, stops at once with one line naming the command.
#   sh tools/deps.sh          install what is missing (make check runs this)
#   sh tools/deps.sh --list   print the Debian packages, one a line
set -eu
cd "$(dirname "$0")/.."

# gcc-12-multilib (gcc -m32 for the i386 build), not gcc-multilib: that one
# removes gcc-aarch64-linux-gnu.
PACKAGES="gcc make libc6-dev python3 python3-numpy python3-torch python3-sentencepiece
  qemu-system-arm qemu-user gcc-arm-none-eabi libnewlib-arm-none-eabi binutils-arm-none-eabi
  gcc-aarch64-linux-gnu libc6-dev-arm64-cross clang libclang-rt-dev
  gcc-12-multilib valgrind"

if [ "${1:-}" = "--list" ]; then
    for p in $PACKAGES; do echo "$p"; done
    exit 0
fi

missing=""
for p in $PACKAGES; do
    dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
# Node.js from Debian where the machine has none (a machine whose Node.js
# bundles npm, as NodeSource's does, refuses Debian's npm package beside it).
command -v npm >/dev/null 2>&1 || missing="$missing nodejs npm"

if [ -n "$missing" ]; then
    if [ "$(id -u)" != 0 ]; then
        echo "error: the tests need Debian packages that are missing:$missing; run: sudo sh tools/deps.sh" >&2
        exit 1
    fi
    echo "tools/deps.sh: installing$missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # without recommends, which would pull gcc-multilib in
    apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi

# tests/js: @huggingface/tokenizers and the vocabularies, pinned in package-lock.json;
# npm ci again whenever the lock is newer than what it installed.
stamp=tests/js/node_modules/.package-lock.json
if [ ! -f "$stamp" ] || [ tests/js/package-lock.json -nt "$stamp" ]; then
    echo "tools/deps.sh: npm ci in tests/js"
    (cd tests/js && npm ci --no-audit --no-fund >/dev/null)
fi

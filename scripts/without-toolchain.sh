#!/usr/bin/env bash
# Runs a command with no C/C++ toolchain on the PATH (no cc, gcc, g++, clang, make, python), as
# on a machine that never installed one: what `npm install` does there is what a user gets.
# Usage: scripts/without-toolchain.sh COMMAND [ARGS...]
set -euo pipefail
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
IFS=: read -ra dirs <<<"$PATH"
for dir in "${dirs[@]}"; do
  [ -d "$dir" ] || continue
  for exe in "$dir"/*; do
    name=${exe##*/}
    case "$name" in
      cc | c++ | cpp | gcc* | g++* | clang* | make | gmake | cmake | python* | *-linux-gnu-*) continue ;;
    esac
    [ -x "$exe" ] && [ ! -e "$bin/$name" ] && ln -s "$exe" "$bin/$name"
  done
done
for tool in cc g++ make python3; do
  if PATH=$bin command -v "$tool" >/dev/null; then echo "without-toolchain: $tool is still on the PATH" >&2; exit 1; fi
done
# node-gyp's other ways to a compiler or make.
env -u PYTHON -u npm_config_python -u CC -u CXX -u CC_target -u CXX_target -u CC_host -u CXX_host -u LINK \
  -u MAKE -u npm_config_make PATH="$bin" "$@"

#!/usr/bin/env bash
# Proves that the embedded node installs and runs on a machine without a C/C++ toolchain: a
# copy of the checkout is installed with `npm ci` with no compiler, make or python on the PATH
# (scripts/without-toolchain.sh), so the optional native ZooKeeper client cannot build; then
# `switchboard start` must come up. .ci/run runs it; it takes 30 to 60 s (npm's cache is warm).
set -euo pipefail
cd "$(dirname "$0")/.."
here=$(pwd)
copy=$(mktemp -d)
trap 'rm -rf "$copy"' EXIT

git ls-files -z | tar --null -cf - -T - | tar -xf - -C "$copy"
cd "$copy"
if ! "$here/scripts/without-toolchain.sh" npm ci --no-audit --no-fund --prefer-offline >install.log 2>&1; then
  cat install.log >&2
  echo "check-no-toolchain: npm ci failed without a toolchain" >&2
  exit 1
fi
if [ -e node_modules/zookeeper ]; then
  echo "check-no-toolchain: the native zookeeper client was installed although nothing could compile it" >&2
  exit 1
fi

log=$copy/start.log
node bin/switchboard.js start --port 0 --gate-port 0 --log-level info >"$log" 2>&1 &
pid=$!
for _ in $(seq 1 100); do
  if grep -q '"msg":"gate listening"' "$log"; then
    kill "$pid"
    wait "$pid" || true
    echo "check-no-toolchain: npm ci without a toolchain left out the native ZooKeeper client; switchboard start runs"
    exit 0
  fi
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
cat "$log" >&2
kill "$pid" 2>/dev/null || true
echo "check-no-toolchain: switchboard start did not come up without the native ZooKeeper client" >&2
exit 1

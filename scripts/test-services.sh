#!/usr/bin/env bash
# The real servers the tests start themselves: redis-server, java and the ZooKeeper server jar
# (Debian packages redis-server, default-jre-headless, zookeeper; none runs as a service). `npm
# test` and .ci/run run this first. Where something is missing and this is Debian or Ubuntu as
# root, it installs it once, saying so; elsewhere it stops at once, naming the command to run.
# SWITCHBOARD_TEST_INSTALL=no: never install, only say what is missing.
set -euo pipefail

jar=${SWITCHBOARD_ZOOKEEPER_JAR:-/usr/share/java/zookeeper.jar}

missing() {
  local packages=()
  command -v redis-server >/dev/null 2>&1 || packages+=(redis-server)
  command -v java >/dev/null 2>&1 || packages+=(default-jre-headless)
  # ZOOKEEPER_CLASSPATH (the harness's way to use another ZooKeeper) stands in for the jar.
  [ -n "${ZOOKEEPER_CLASSPATH:-}" ] || [ -f "$jar" ] || packages+=(zookeeper)
  echo "${packages[@]}"
}

packages=$(missing)
[ -z "$packages" ] && exit 0

command="apt-get update && apt-get install -y --no-install-recommends $packages"
if [ "${SWITCHBOARD_TEST_INSTALL:-yes}" = no ] || [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  {
    echo "The tests start real servers and this machine lacks: $packages."
    if command -v apt-get >/dev/null 2>&1; then
      echo "Install them, as root:  $command"
    else
      echo "Install Redis (redis-server), a Java runtime and Apache ZooKeeper; on Debian or Ubuntu, as root:  $command"
      echo "(another ZooKeeper: set ZOOKEEPER_CLASSPATH to its server jars)"
    fi
  } >&2
  exit 1
fi

echo "The tests start real servers; installing the Debian packages $packages (once): $command" >&2
export DEBIAN_FRONTEND=noninteractive
# shellcheck disable=SC2086 # one word per package
if ! { apt-get update -qq && apt-get install -y -qq --no-install-recommends $packages; } >/dev/null; then
  echo "Installing $packages failed: run $command and look at its output" >&2
  exit 1
fi
still=$(missing)
if [ -n "$still" ]; then
  echo "Installed $packages, but still missing: $still" >&2
  exit 1
fi

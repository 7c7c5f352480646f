#!/usr/bin/env bash
# The real servers the tests start themselves: redis-server (and redis-cli, which joins a Redis
# Cluster), java and the ZooKeeper server jar (Debian packages redis-server, which brings
# redis-tools, default-jre-headless, zookeeper). `npm test` and .ci/run run this first. Where
# something is missing and this is Debian or Ubuntu as root, it installs it once, saying so;
# elsewhere it stops at once, naming the command to run. It also stops, naming what to install,
# when the native ZooKeeper client (the optional `zookeeper` package, which needs a C/C++
# toolchain to build) is not installed: the cluster tests need it.
#   SWITCHBOARD_TEST_INSTALL=no   never install, only say what is missing
#   SWITCHBOARD_ZOOKEEPER_JAR     where the jar is looked for (this script's own test only)
set -euo pipefail
cd "${BASH_SOURCE[0]%/*}/.."

jar=${SWITCHBOARD_ZOOKEEPER_JAR:-/usr/share/java/zookeeper.jar}

missing() {
  local need=''
  # redis-cli creates the tests' Redis Clusters: Debian's redis-server brings it (redis-tools).
  if ! command -v redis-server >/dev/null 2>&1; then
    need="$need redis-server"
  elif ! command -v redis-cli >/dev/null 2>&1; then
    need="$need redis-tools"
  fi
  command -v java >/dev/null 2>&1 || need="$need default-jre-headless"
  # ZOOKEEPER_CLASSPATH (the harness's way to use another ZooKeeper) stands in for the jar.
  [ -n "${ZOOKEEPER_CLASSPATH:-}" ] || [ -f "$jar" ] || need="$need zookeeper"
  echo "${need# }"
}

packages=$(missing)
if [ -n "$packages" ]; then
  root=yes
  [ "$(id -u)" = 0 ] || root=no
  sudo=''
  [ "$root" = yes ] || sudo='sudo '
  command="${sudo}apt-get update && ${sudo}apt-get install -y --no-install-recommends $packages"
  if [ "${SWITCHBOARD_TEST_INSTALL:-yes}" = no ] || [ "$root" = no ] || ! command -v apt-get >/dev/null 2>&1; then
    {
      echo "The tests start real servers and this machine lacks: $packages."
      if command -v apt-get >/dev/null 2>&1; then
        echo "Install them:  $command"
      else
        what=''
        for p in $packages; do
          case $p in
            redis-server) what="$what, Redis (redis-server and redis-cli)" ;;
            redis-tools) what="$what, Redis's command line tool (redis-cli)" ;;
            default-jre-headless) what="$what, a Java runtime (java)" ;;
            zookeeper) what="$what, Apache ZooKeeper (or set ZOOKEEPER_CLASSPATH to its server jars)" ;;
          esac
        done
        echo "Install${what#,}; on Debian or Ubuntu:  $command"
      fi
    } >&2
    exit 1
  fi

  echo "The tests start real servers; installing the Debian packages $packages (once): $command" >&2
  export DEBIAN_FRONTEND=noninteractive
  # One word per package.
  # shellcheck disable=SC2086
  if ! { apt-get update -qq && apt-get install -y -qq --no-install-recommends $packages; } >/dev/null; then
    echo "Installing $packages failed: run $command and look at its output" >&2
    exit 1
  fi
  still=$(missing)
  if [ -n "$still" ]; then
    echo "Installed $packages, but still missing: $still" >&2
    exit 1
  fi
fi

# The native ZooKeeper client, once the packages are installed (before `npm install` there is
# nothing to check: .ci/run runs this step first).
if [ -d node_modules ] && ! node -e "require('zookeeper')" >/dev/null 2>&1; then
  echo "The cluster tests need the native ZooKeeper client (the optional npm package zookeeper), which npm install could not build: install python3, make and g++ (Debian: apt-get update && apt-get install -y python3 make g++), then run npm install again" >&2
  exit 1
fi

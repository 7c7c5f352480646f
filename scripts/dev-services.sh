#!/usr/bin/env bash
# Starts ZooKeeper and Redis for local development on 127.0.0.1, writes the environment of a
# cluster on them (secrets, --zk, --redis, ZooKeeper identities for the workers and the gate) to
# a file every terminal sources, prints the commands to run, and stops both on Ctrl-C or SIGTERM. Needs java with the ZooKeeper jar (Debian: apt-get install
# zookeeper) and redis-server.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: scripts/dev-services.sh [-d DIR] [--zk-port PORT] [--redis-port PORT]

Starts a standalone ZooKeeper and a Redis on 127.0.0.1, writes DIR/env with the variables a
cluster on them needs (token and cluster secrets, --zk, --redis, and ZooKeeper identities for the
workers and the gate: made up for this run, kept in DIR with --dir) and prints the commands to
run in other terminals after `. DIR/env`. Stays in the foreground: Ctrl-C (or SIGTERM) stops both.

  -d, --dir DIR       keep the data (and logs) in DIR, which is kept on exit;
                      default: a temporary directory, removed on exit
  --zk-port PORT      ZooKeeper client port (default: a free one)
  --redis-port PORT   Redis port (default: a free one)
  -h, --help          this text

ZOOKEEPER_CLASSPATH overrides the classpath (default /usr/share/java/zookeeper.jar:/etc/zookeeper/conf).
EOF
}

dir=""
zk_port=""
redis_port=""
while (($#)); do
  case "$1" in
    -d | --dir) dir="${2:?--dir needs a value}"; shift 2 ;;
    --zk-port) zk_port="${2:?--zk-port needs a value}"; shift 2 ;;
    --redis-port) redis_port="${2:?--redis-port needs a value}"; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
done

temporary=0
die() {
  temporary=0 # keep the logs for a look
  echo "dev-services: $*" >&2
  exit 1
}

command -v java >/dev/null || die "java not found (apt-get install default-jre-headless zookeeper)"
command -v redis-server >/dev/null || die "redis-server not found (apt-get install redis-server)"
classpath="${ZOOKEEPER_CLASSPATH:-/usr/share/java/zookeeper.jar:/etc/zookeeper/conf}"
[[ -n "${ZOOKEEPER_CLASSPATH:-}" || -f /usr/share/java/zookeeper.jar ]] ||
  die "/usr/share/java/zookeeper.jar not found (apt-get install zookeeper, or set ZOOKEEPER_CLASSPATH)"

# A port nobody listens on right now (asked of the kernel, through node, which we have anyway).
free_port() {
  node -e "const s = require('net').createServer().listen(0, '127.0.0.1', () => { console.log(s.address().port); s.close(); })"
}
[[ -n "$zk_port" ]] || zk_port=$(free_port)
[[ -n "$redis_port" ]] || redis_port=$(free_port)

if [[ -z "$dir" ]]; then
  dir=$(mktemp -d "${TMPDIR:-/tmp}/switchboard-dev.XXXXXX")
  temporary=1
fi
mkdir -p "$dir/zookeeper/data" "$dir/redis"
dir=$(cd "$dir" && pwd)

# ZooKeeper identities: the workers' and the gate's (which the workers grant read access). Kept
# with the data: the znodes of a kept ZooKeeper belong to the identity that made them.
credentials="$dir/zookeeper/credentials"
if [[ ! -f "$credentials" ]]; then
  random() { node -e "console.log(require('crypto').randomBytes(18).toString('base64url'))"; }
  (umask 077 && printf 'zk_worker=sb-worker:%s\nzk_gate=sb-gate:%s\n' "$(random)" "$(random)" >"$credentials")
fi
# shellcheck source=/dev/null
source "$credentials"
# The token and cluster secrets of this run (32 or more characters, as workers and gates require),
# kept beside the identities so every terminal of the run uses the same.
if [[ -z "${token_secret:-}" ]]; then
  hex() { node -e "console.log(require('crypto').randomBytes(32).toString('hex'))"; }
  (umask 077 && printf 'token_secret=%s\ncluster_secret=%s\n' "$(hex)" "$(hex)" >>"$credentials")
  # shellcheck source=/dev/null
  source "$credentials"
fi
# user:base64(sha1("user:password")), the id ZooKeeper gives that identity.
digest_id() { node -e "const a = process.argv[1]; console.log(a.slice(0, a.indexOf(':')) + ':' + require('crypto').createHash('sha1').update(a).digest('base64'))" "$1"; }
zk_gate_id=$(digest_id "$zk_gate")

zk_pid=""
redis_pid=""
stop() {
  local status=$?
  trap - EXIT INT TERM
  echo "stopping..." >&2
  for pid in $zk_pid $redis_pid; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in $zk_pid $redis_pid; do wait "$pid" 2>/dev/null || true; done
  if ((temporary)); then rm -rf "$dir"; else echo "data kept in $dir" >&2; fi
  exit "$status"
}
trap stop EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

cat >"$dir/zookeeper/zoo.cfg" <<EOF
tickTime=2000
dataDir=$dir/zookeeper/data
clientPort=$zk_port
clientPortAddress=127.0.0.1
minSessionTimeout=2000
maxSessionTimeout=60000
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr,cons,dump
EOF
java -Xmx256m -cp "$classpath" org.apache.zookeeper.server.quorum.QuorumPeerMain "$dir/zookeeper/zoo.cfg" \
  >"$dir/zookeeper/zookeeper.log" 2>&1 &
zk_pid=$!

redis-server --port "$redis_port" --bind 127.0.0.1 --dir "$dir/redis" --appendonly yes --save '' \
  >"$dir/redis/redis.log" 2>&1 &
redis_pid=$!

# Sends `request` on a fresh connection; succeeds if a line of the answer contains `expect`.
probe() {
  local port=$1 request=$2 expect=$3 line found=1
  { exec 3<>"/dev/tcp/127.0.0.1/$port"; } 2>/dev/null || return 1
  printf '%b' "$request" >&3
  while IFS= read -r -t 2 line <&3; do
    if [[ $line == *"$expect"* ]]; then found=0; break; fi
  done
  exec 3<&- 3>&-
  return "$found"
}

wait_for() {
  local what=$1 pid=$2 port=$3 request=$4 expect=$5 log=$6
  for _ in $(seq 1 200); do
    kill -0 "$pid" 2>/dev/null || die "$what exited; see $log: $(tail -n 5 "$log")"
    if probe "$port" "$request" "$expect"; then return 0; fi
    sleep 0.1
  done
  die "$what did not come up on port $port; see $log"
}
wait_for ZooKeeper "$zk_pid" "$zk_port" 'srvr' 'Mode: standalone' "$dir/zookeeper/zookeeper.log"
wait_for Redis "$redis_pid" "$redis_port" 'PING\r\n' '+PONG' "$dir/redis/redis.log"

# Everything a worker, a gate and a chat of this run need, in one environment: each command
# reads its own variables (the gate's identity is SWITCHBOARD_GATE_ZK_AUTH, the workers'
# SWITCHBOARD_ZK_AUTH), so every terminal sources the same file.
env_file="$dir/env"
(
  umask 077
  cat >"$env_file" <<EOF
export SWITCHBOARD_SECRET=$token_secret
export SWITCHBOARD_CLUSTER_SECRET=$cluster_secret
export SWITCHBOARD_ZK=127.0.0.1:$zk_port
export SWITCHBOARD_REDIS=redis://127.0.0.1:$redis_port
export SWITCHBOARD_ZK_AUTH='$zk_worker'
export SWITCHBOARD_ZK_READERS='$zk_gate_id'
export SWITCHBOARD_GATE_ZK_AUTH='$zk_gate'
EOF
)

cat <<EOF
ZooKeeper  127.0.0.1:$zk_port   (data $dir/zookeeper)
Redis      redis://127.0.0.1:$redis_port   (data $dir/redis)

  --zk 127.0.0.1:$zk_port --redis redis://127.0.0.1:$redis_port

ZooKeeper identities for this run (OPERATIONS.md, ZooKeeper authentication):
  workers: --zk-auth '$zk_worker' --zk-readers '$zk_gate_id'
  gate:    --zk-auth '$zk_gate'

This script stays in the foreground: Ctrl-C stops ZooKeeper and Redis. In each new terminal,
load this run's secrets, addresses and identities (the same in every terminal):

  . $env_file

then run one of these per terminal (each stays in the foreground; Ctrl-C stops it):

  npx switchboard worker --port 9001
  npx switchboard worker --port 9002
  npx switchboard gate --port 8080
  npx switchboard chat --gate http://127.0.0.1:8080 --user alice --register
  npx switchboard chat --gate http://127.0.0.1:8080 --user bob --register
EOF

# Wait until one of them exits (that is an error) or a signal arrives.
set +e
wait -n "$zk_pid" "$redis_pid"
set -e
die "a service exited unexpectedly; logs in $dir"

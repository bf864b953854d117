#!/usr/bin/env bash
# Local Elasticsearch and RabbitMQ for tests, benchmarks and development, without Docker.
#   scripts/services.sh up|up-early|down|status
#     one Elasticsearch node on 127.0.0.1:9200 (single-node discovery) and RabbitMQ on 5672
#     (up-early: the same in the background, returning at once)
#   scripts/services.sh cluster-up|cluster-down|cluster-status|cluster-urls
#     a three-node Elasticsearch cluster (vss-cluster) for fault tests: HTTP 9201-9203,
#     transport 9301-9303, all on 127.0.0.1, every node master-eligible and a data node. It runs
#     next to the single node and never touches it.
#   scripts/services.sh cluster-kill N | cluster-start N
#     SIGKILL node N (1-3) of the cluster / start it again and wait until it has rejoined.
#   scripts/services.sh cluster-wipe
#     stop the cluster and delete its data (a fresh cluster is bootstrapped on the next cluster-up).
#   scripts/services.sh broker-fault-up|broker-fault-start|broker-fault-stop|broker-fault-kill|
#                       broker-fault-down|broker-fault-ctl ARGS...
#     a separate RabbitMQ node for the broker-restart fault test: AMQP on BROKER_FAULT_PORT
#     (default 5682), node vss-fault-<port>@localhost, data under <cache>/rabbitmq-fault-<port>.
#     up/start: start it (on its data) and wait until it has booted; stop: a clean stop;
#     kill: SIGKILL; down: stop it and delete its data; ctl: rabbitmqctl on that node.
# Idempotent: `up`, `cluster-up` and `cluster-start` start only what is not already reachable.
# Elasticsearch comes from Maven Central (integ-test-zip distribution: server + transport
# modules), RabbitMQ from Debian. The cluster nodes are separate processes of the same unpacked
# distribution, each with its own config dir (ES_PATH_CONF), path.data, path.logs and pid file
# under <cache>/es-cluster/node-N.
set -euo pipefail

ES_VERSION="${ES_VERSION:-8.19.21}"
ES_PORT="${ES_PORT:-9200}"
ES_HEAP="${ES_HEAP:-512m}"
AMQP_PORT=5672
ES_USER=vss-es # Elasticsearch refuses to run as root
REPO="$(cd "$(dirname "$0")/.." && pwd)"
CACHE="${VSS_SERVICES_DIR:-$REPO/.cache/services}"
JAVA_HOME_17="${ES_JAVA_HOME:-$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")}"
CLUSTER_NAME="${ES_CLUSTER_NAME:-vss-cluster}"
CLUSTER_SIZE=3
CLUSTER_HEAP="${ES_CLUSTER_HEAP:-384m}"
CLUSTER_HTTP_BASE="${ES_CLUSTER_HTTP_BASE:-9200}"           # node N listens on BASE+N
CLUSTER_TRANSPORT_BASE="${ES_CLUSTER_TRANSPORT_BASE:-9300}" # node N talks to its peers on BASE+N

log() { printf '[services] %s\n' "$*" >&2; }
es_up() { curl -fsS "http://127.0.0.1:$ES_PORT/_cluster/health" >/dev/null 2>&1; }
amqp_up() { (exec 3<>"/dev/tcp/127.0.0.1/$AMQP_PORT") 2>/dev/null; }

as_es_user() {
  if [ "$(id -u)" = 0 ]; then runuser -u "$ES_USER" -- "$@"; else "$@"; fi
}

es_home() { echo "$CACHE/elasticsearch-$ES_VERSION"; }

install_es() {
  local home zip
  home="$(es_home)"
  [ -x "$home/bin/elasticsearch" ] && return 0
  mkdir -p "$CACHE"
  zip="$CACHE/elasticsearch-$ES_VERSION.zip"
  if [ ! -f "$zip" ]; then
    log "fetching Elasticsearch $ES_VERSION from Maven Central"
    mvn -q -B dependency:copy \
      -Dartifact="org.elasticsearch.distribution.integ-test-zip:elasticsearch:$ES_VERSION:zip" \
      -DoutputDirectory="$CACHE" >&2
  fi
  log "unpacking $zip"
  rm -rf "$home.tmp" && mkdir -p "$home.tmp"
  unzip -q "$zip" -d "$home.tmp"
  mv "$home.tmp/elasticsearch-$ES_VERSION" "$home" && rm -rf "$home.tmp"
}

# A checkout the service user cannot read (e.g. under /root) runs Elasticsearch from /var/tmp.
RELOCATED_CACHE=/var/tmp/vss-services
relocated() {
  [ "$(id -u)" = 0 ] && id "$ES_USER" >/dev/null 2>&1 &&
    ! runuser -u "$ES_USER" -- test -r "$CACHE/elasticsearch-$ES_VERSION/bin/elasticsearch"
}

# Installs the distribution, creates the service user and moves CACHE where that user can read.
prepare_es_home() {
  install_es
  [ "$(id -u)" = 0 ] || return 0
  id "$ES_USER" >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin "$ES_USER"
  if relocated; then
    local home
    home="$(es_home)"
    CACHE="$RELOCATED_CACHE"
    mkdir -p "$CACHE"
    [ -x "$(es_home)/bin/elasticsearch" ] || cp -a "$home" "$CACHE/"
  fi
}

start_es() {
  if es_up; then log "Elasticsearch already reachable on $ES_PORT"; return 0; fi
  prepare_es_home
  local home
  home="$(es_home)"
  mkdir -p "$home/data" "$home/logs"
  cat >"$home/config/elasticsearch.yml" <<YML
cluster.name: vss-local
node.name: vss-local-1
network.host: 127.0.0.1
http.port: $ES_PORT
discovery.type: single-node
xpack.security.enabled: false
path.data: $home/data
path.logs: $home/logs
cluster.routing.allocation.disk.threshold_enabled: false
action.destructive_requires_name: false
YML
  printf -- '-Xms%s\n-Xmx%s\n' "$ES_HEAP" "$ES_HEAP" >"$home/config/jvm.options.d/heap.options"
  [ "$(id -u)" = 0 ] && chown -R "$ES_USER" "$home"
  log "starting Elasticsearch $ES_VERSION on 127.0.0.1:$ES_PORT (heap $ES_HEAP)"
  as_es_user env ES_JAVA_HOME="$JAVA_HOME_17" "$home/bin/elasticsearch" -d -p "$home/es.pid" >"$home/logs/start.out" 2>&1 || {
    tail -n 30 "$home/logs/start.out" >&2
    return 1
  }
  for _ in $(seq 1 90); do
    es_up && { log "Elasticsearch is up"; return 0; }
    sleep 1
  done
  log "Elasticsearch did not come up; last log lines:"
  tail -n 30 "$home/logs/start.out" >&2
  return 1
}

install_rabbitmq() {
  command -v rabbitmq-server >/dev/null 2>&1 && return 0
  log "installing rabbitmq-server (Debian)"
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq rabbitmq-server >&2
}

start_rabbitmq() {
  if amqp_up; then log "RabbitMQ already reachable on $AMQP_PORT"; return 0; fi
  install_rabbitmq
  amqp_up && return 0 # the package may start it
  log "starting RabbitMQ"
  rabbitmq-server -detached >&2
  for _ in $(seq 1 60); do
    amqp_up && rabbitmqctl -q await_startup >/dev/null 2>&1 && { log "RabbitMQ is up"; return 0; }
    sleep 1
  done
  log "RabbitMQ did not come up"
  return 1
}

stop_es() {
  local pidf
  for pidf in "$(es_home)/es.pid" "$RELOCATED_CACHE/elasticsearch-$ES_VERSION/es.pid"; do
    [ -f "$pidf" ] && kill "$(cat "$pidf")" 2>/dev/null && log "stopped Elasticsearch"
  done
  return 0
}

# ---- three-node cluster -------------------------------------------------------------------

node_http() { echo $((CLUSTER_HTTP_BASE + $1)); }
node_transport() { echo $((CLUSTER_TRANSPORT_BASE + $1)); }
node_name() { echo "vss-cluster-$1"; }
cluster_dir() { echo "$CACHE/es-cluster"; }
node_dir() { echo "$(cluster_dir)/node-$1"; }
node_pid() {
  local f
  f="$(node_dir "$1")/es.pid"
  [ -s "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null && cat "$f"
}
node_url() { echo "http://127.0.0.1:$(node_http "$1")"; }
# Up means: this port answers as a node of our cluster (not some other Elasticsearch). The
# integ-test-zip has no `GET /`; the node's local view of health answers even without a master.
node_health() { curl -fsS --max-time 3 "$(node_url "$1")/_cluster/health?local=true" 2>/dev/null; }
node_up() { node_health "$1" | grep -q "\"cluster_name\":\"$CLUSTER_NAME\""; }
check_node_arg() {
  case "${1:-}" in
    [1-9]) [ "$1" -le "$CLUSTER_SIZE" ] && return 0 ;;
  esac
  echo "usage: $0 ${2:-cluster-kill} N   (N = 1..$CLUSTER_SIZE)" >&2
  exit 2
}
# The first node that answers, to ask about the whole cluster.
any_node_url() {
  local n
  for n in $(seq 1 "$CLUSTER_SIZE"); do
    node_up "$n" && { node_url "$n"; return 0; }
  done
  return 1
}

write_node_config() {
  local n=$1 home dir seeds masters i
  home="$(es_home)"
  dir="$(node_dir "$n")"
  mkdir -p "$dir/config/jvm.options.d" "$dir/data" "$dir/logs"
  # The distribution's stock files (jvm.options, log4j2.properties, ...), never its keystore
  # or the single node's elasticsearch.yml.
  [ -f "$dir/config/jvm.options" ] ||
    (cd "$home/config" && cp -a jvm.options log4j2.properties role_mapping.yml roles.yml users users_roles "$dir/config/")
  seeds="" masters=""
  for i in $(seq 1 "$CLUSTER_SIZE"); do
    seeds="$seeds${seeds:+, }\"127.0.0.1:$(node_transport "$i")\""
    masters="$masters${masters:+, }\"$(node_name "$i")\""
  done
  cat >"$dir/config/elasticsearch.yml" <<YML
cluster.name: $CLUSTER_NAME
node.name: $(node_name "$n")
network.host: 127.0.0.1
http.port: $(node_http "$n")
transport.port: $(node_transport "$n")
discovery.seed_hosts: [$seeds]
# Used only when the cluster is bootstrapped for the first time (empty data dirs).
cluster.initial_master_nodes: [$masters]
xpack.security.enabled: false
path.data: $dir/data
path.logs: $dir/logs
cluster.routing.allocation.disk.threshold_enabled: false
action.destructive_requires_name: false
YML
  printf -- '-Xms%s\n-Xmx%s\n' "$CLUSTER_HEAP" "$CLUSTER_HEAP" >"$dir/config/jvm.options.d/heap.options"
  [ "$(id -u)" = 0 ] && chown -R "$ES_USER" "$dir"
  return 0
}

# Launches node N in the background of this shell (the launcher returns once the node has
# started, which for the first nodes of a cluster means once a master is elected, so the nodes
# must be launched together). Call prepare_es_home first.
launch_node() {
  local n=$1 dir pid
  dir="$(node_dir "$n")"
  if node_up "$n"; then log "cluster node $n already up on $(node_http "$n")"; return 0; fi
  if pid="$(node_pid "$n")"; then
    log "cluster node $n (pid $pid) is running but does not answer yet"
    return 0
  fi
  if node_health "$n" >/dev/null; then
    log "port $(node_http "$n") is taken by an Elasticsearch that is not $CLUSTER_NAME"
    return 1
  fi
  write_node_config "$n"
  rm -f "$dir/es.pid"
  log "starting cluster node $n: http 127.0.0.1:$(node_http "$n"), transport $(node_transport "$n"), heap $CLUSTER_HEAP"
  as_es_user env ES_JAVA_HOME="$JAVA_HOME_17" ES_PATH_CONF="$dir/config" \
    "$(es_home)/bin/elasticsearch" -d -p "$dir/es.pid" >"$dir/logs/start.out" 2>&1 || {
    log "cluster node $n failed to start; last lines of $dir/logs/start.out:"
    tail -n 30 "$dir/logs/start.out" >&2
    return 1
  }
}

node_log_tail() {
  local n=$1 dir
  dir="$(node_dir "$n")"
  log "--- node $n: $dir/logs/$CLUSTER_NAME.log"
  tail -n 20 "$dir/logs/$CLUSTER_NAME.log" >&2 2>/dev/null || tail -n 20 "$dir/logs/start.out" >&2 2>/dev/null || true
}

# Waits until the cluster has all its nodes and the given health (green by default).
wait_cluster() {
  local want=${1:-green} secs=${2:-120} url health
  for _ in $(seq 1 "$secs"); do
    if url="$(any_node_url)"; then
      health="$(curl -fsS --max-time 10 "$url/_cluster/health?wait_for_nodes=$CLUSTER_SIZE&wait_for_status=$want&timeout=1s" 2>/dev/null || true)"
      if printf '%s' "$health" | grep -q '"timed_out":false'; then
        log "cluster $CLUSTER_NAME: $CLUSTER_SIZE nodes, $(printf '%s' "$health" | sed -E 's/.*"status":"([a-z]+)".*/\1/')"
        return 0
      fi
    fi
    sleep 1
  done
  log "cluster $CLUSTER_NAME did not reach $CLUSTER_SIZE nodes and $want within ${secs}s: ${health:-no node answers}"
  local n
  for n in $(seq 1 "$CLUSTER_SIZE"); do node_log_tail "$n"; done
  return 1
}

cluster_up() {
  prepare_es_home
  local n rc=0 pids=()
  for n in $(seq 1 "$CLUSTER_SIZE"); do
    launch_node "$n" &
    pids+=($!)
  done
  for n in "${pids[@]}"; do wait "$n" || rc=1; done
  [ "$rc" = 0 ] || return 1
  wait_cluster green "${ES_CLUSTER_WAIT:-180}"
}

# Starts node N again (after cluster-kill) and waits until the cluster counts it again.
cluster_start() {
  local n=$1 url
  prepare_es_home
  launch_node "$n" || return 1
  for _ in $(seq 1 120); do
    if node_up "$n" && url="$(any_node_url)" &&
      curl -fsS --max-time 5 "$url/_cat/nodes?h=name" 2>/dev/null | grep -qx "$(node_name "$n")"; then
      log "cluster node $n has joined $CLUSTER_NAME"
      return 0
    fi
    sleep 1
  done
  log "cluster node $n did not rejoin within 120s"
  node_log_tail "$n"
  return 1
}

cluster_kill() {
  local n=$1 pid
  relocated && CACHE="$RELOCATED_CACHE"
  if ! pid="$(node_pid "$n")"; then
    log "cluster node $n is not running"
    return 0
  fi
  kill -KILL "$pid"
  for _ in $(seq 1 50); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  rm -f "$(node_dir "$n")/es.pid"
  log "killed cluster node $n (pid $pid, SIGKILL)"
}

cluster_down() {
  relocated && CACHE="$RELOCATED_CACHE"
  local n pid pids=()
  for n in $(seq 1 "$CLUSTER_SIZE"); do
    if pid="$(node_pid "$n")"; then
      kill -TERM "$pid" && pids+=("$pid") && log "stopping cluster node $n (pid $pid)"
    fi
  done
  [ "${#pids[@]}" -gt 0 ] || return 0
  for _ in $(seq 1 60); do
    local alive=0
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ "$alive" = 0 ] && { log "stopped cluster $CLUSTER_NAME"; return 0; }
    sleep 1
  done
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  log "stopped cluster $CLUSTER_NAME (SIGKILL after 60s)"
}

cluster_status() {
  relocated && CACHE="$RELOCATED_CACHE"
  local n pid url
  for n in $(seq 1 "$CLUSTER_SIZE"); do
    pid="$(node_pid "$n" || true)"
    if node_up "$n"; then
      echo "node $n: up ($(node_url "$n"), pid ${pid:-?})"
    elif [ -n "$pid" ]; then
      echo "node $n: starting (pid $pid)"
    else
      echo "node $n: down"
    fi
  done
  if url="$(any_node_url)"; then
    curl -fsS --max-time 10 "$url/_cat/health?v&h=cluster,status,node.total,shards,pri,relo,init,unassign"
    curl -fsS --max-time 10 "$url/_cat/nodes?v&h=name,http_address,master,node.role,heap.percent"
  fi
}

cluster_urls() {
  local n urls=""
  for n in $(seq 1 "$CLUSTER_SIZE"); do urls="$urls${urls:+,}$(node_url "$n")"; done
  echo "$urls"
}

# ---- a separate RabbitMQ node for fault tests ------------------------------------------------
# The shared broker on 5672 serves suites running in parallel, so a test that restarts a broker
# gets a node of its own: its own name, ports, data, logs and Erlang cookie (HOME). The Debian
# wrappers in /usr/sbin switch to the rabbitmq user and its files; the scripts they wrap do not.

FAULT_PORT="${BROKER_FAULT_PORT:-5682}"
FAULT_DIST_PORT="${BROKER_FAULT_DIST_PORT:-$((FAULT_PORT + 20000))}"
RABBIT_BIN="${RABBITMQ_SCRIPTS:-/usr/lib/rabbitmq/bin}"

fault_dir() { echo "$CACHE/rabbitmq-fault-$FAULT_PORT"; }
fault_env() {
  local d
  d="$(fault_dir)"
  env HOME="$d" RABBITMQ_CONF_ENV_FILE=/dev/null \
    RABBITMQ_NODENAME="vss-fault-$FAULT_PORT@localhost" RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 \
    RABBITMQ_NODE_PORT="$FAULT_PORT" RABBITMQ_DIST_PORT="$FAULT_DIST_PORT" \
    RABBITMQ_MNESIA_BASE="$d/mnesia" RABBITMQ_LOG_BASE="$d/log" RABBITMQ_PID_FILE="$d/rabbitmq.pid" \
    RABBITMQ_CONFIG_FILE="$d/rabbitmq.conf" RABBITMQ_ADVANCED_CONFIG_FILE="$d/advanced.config" \
    RABBITMQ_ENABLED_PLUGINS_FILE="$d/enabled_plugins" "$@"
}
fault_ctl() { fault_env "$RABBIT_BIN/rabbitmqctl" "$@"; }
fault_pid() {
  local f
  f="$(fault_dir)/rabbitmq.pid"
  [ -s "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null && cat "$f"
}
fault_booted() { fault_ctl -q --timeout 5 await_startup >/dev/null 2>&1; }

fault_start() {
  local d launcher
  d="$(fault_dir)"
  if fault_pid >/dev/null && fault_booted; then log "fault broker already up on $FAULT_PORT"; return 0; fi
  if ! fault_pid >/dev/null; then
    install_rabbitmq
    mkdir -p "$d/log"
    # its own (empty) configuration, never the shared broker's /etc/rabbitmq
    [ -f "$d/rabbitmq.conf" ] || echo 'log.file.level = info' >"$d/rabbitmq.conf"
    [ -f "$d/enabled_plugins" ] || echo '[].' >"$d/enabled_plugins"
    rm -f "$d/rabbitmq.pid"
    log "starting the fault broker: AMQP 127.0.0.1:$FAULT_PORT, node vss-fault-$FAULT_PORT@localhost"
    # Detached from the caller's pipes, so a test's `services.sh` call returns once it has booted.
    fault_env setsid "$RABBIT_BIN/rabbitmq-server" </dev/null >>"$d/log/start.out" 2>&1 &
    launcher=$!
  fi
  for _ in $(seq 1 "${BROKER_FAULT_WAIT:-120}"); do
    fault_booted && { log "fault broker is up"; return 0; }
    if [ -n "${launcher:-}" ] && ! kill -0 "$launcher" 2>/dev/null; then break; fi
    sleep 1
  done
  log "the fault broker did not boot; last lines of $d/log/start.out:"
  tail -n 30 "$d/log/start.out" >&2
  return 1
}

# Waits until the node's OS process is gone (a clean stop, or after SIGKILL).
fault_wait_gone() {
  local pid=$1
  for _ in $(seq 1 300); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.2
  done
  return 1
}

fault_stop() {
  local pid
  pid="$(fault_pid)" || { log "fault broker is not running"; return 0; }
  fault_ctl -q stop >/dev/null 2>&1 || kill -TERM "$pid"
  fault_wait_gone "$pid" || { kill -KILL "$pid"; fault_wait_gone "$pid"; }
  log "stopped the fault broker (pid $pid)"
}

fault_kill() {
  local pid
  pid="$(fault_pid)" || { log "fault broker is not running"; return 0; }
  kill -KILL "$pid"
  fault_wait_gone "$pid"
  log "killed the fault broker (pid $pid, SIGKILL)"
}

case "${1:-status}" in
  up)
    # One at a time: an `up-early` may still be starting what this one would start again. The
    # lock is not passed on (-o), or the daemons started under it would hold it for good.
    mkdir -p "$CACHE"
    flock -o "$CACHE/.up.lock" bash "$0" up-now
    ;;
  up-now) start_es && start_rabbitmq ;;
  up-early)
    # `npm test` starts what is missing in the background while it checks and runs the tier
    # that needs no service; the services tier's own `up` waits for it (its log: up-early.log).
    es_up && amqp_up && exit 0
    mkdir -p "$CACHE"
    nohup bash "$0" up >"$CACHE/up-early.log" 2>&1 </dev/null &
    ;;
  down)
    stop_es
    if amqp_up; then rabbitmqctl -q stop >/dev/null 2>&1 && log "stopped RabbitMQ"; fi
    ;;
  status)
    es_up && echo "elasticsearch: up (127.0.0.1:$ES_PORT)" || echo "elasticsearch: down"
    amqp_up && echo "rabbitmq: up (127.0.0.1:$AMQP_PORT)" || echo "rabbitmq: down"
    ;;
  cluster-up) cluster_up ;;
  cluster-down) cluster_down ;;
  cluster-status) cluster_status ;;
  cluster-urls) cluster_urls ;;
  cluster-kill)
    check_node_arg "${2:-}" cluster-kill
    cluster_kill "$2"
    ;;
  cluster-start)
    check_node_arg "${2:-}" cluster-start
    cluster_start "$2"
    ;;
  cluster-wipe)
    cluster_down
    rm -rf "$(cluster_dir)"
    log "deleted $(cluster_dir)"
    ;;
  broker-fault-up | broker-fault-start) fault_start ;;
  broker-fault-stop) fault_stop ;;
  broker-fault-kill) fault_kill ;;
  broker-fault-down)
    fault_stop
    rm -rf "$(fault_dir)"
    ;;
  broker-fault-ctl)
    shift
    fault_ctl "$@"
    ;;
  *)
    echo "usage: $0 up|up-early|down|status|cluster-up|cluster-down|cluster-status|cluster-urls|cluster-kill N|cluster-start N|cluster-wipe|broker-fault-up|broker-fault-start|broker-fault-stop|broker-fault-kill|broker-fault-down|broker-fault-ctl ARGS" >&2
    exit 2
    ;;
esac

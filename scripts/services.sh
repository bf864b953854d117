#!/usr/bin/env bash
# Local Elasticsearch and RabbitMQ for tests, benchmarks and development, without Docker.
#   scripts/services.sh up|down|status
# Idempotent: `up` starts only what is not already reachable. Elasticsearch comes from Maven
# Central (integ-test-zip distribution: server + transport modules), RabbitMQ from Debian.
set -euo pipefail

ES_VERSION="${ES_VERSION:-8.19.21}"
ES_PORT="${ES_PORT:-9200}"
ES_HEAP="${ES_HEAP:-512m}"
AMQP_PORT=5672
ES_USER=vss-es # Elasticsearch refuses to run as root
REPO="$(cd "$(dirname "$0")/.." && pwd)"
CACHE="${VSS_SERVICES_DIR:-$REPO/.cache/services}"
JAVA_HOME_17="${ES_JAVA_HOME:-$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")}"

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

start_es() {
  if es_up; then log "Elasticsearch already reachable on $ES_PORT"; return 0; fi
  install_es
  local home
  home="$(es_home)"
  if [ "$(id -u)" = 0 ]; then
    id "$ES_USER" >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin "$ES_USER"
    if ! runuser -u "$ES_USER" -- test -r "$home/bin/elasticsearch"; then
      # The checkout is not readable by the service user (e.g. under /root): run from /var/tmp.
      CACHE=/var/tmp/vss-services
      mkdir -p "$CACHE" && cp -a "$home" "$CACHE/" && home="$(es_home)"
    fi
  fi
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

start_rabbitmq() {
  if amqp_up; then log "RabbitMQ already reachable on $AMQP_PORT"; return 0; fi
  if ! command -v rabbitmq-server >/dev/null 2>&1; then
    log "installing rabbitmq-server (Debian)"
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq rabbitmq-server >&2
  fi
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
  for pidf in "$(es_home)/es.pid" "/var/tmp/vss-services/elasticsearch-$ES_VERSION/es.pid"; do
    [ -f "$pidf" ] && kill "$(cat "$pidf")" 2>/dev/null && log "stopped Elasticsearch"
  done
  return 0
}

case "${1:-status}" in
  up) start_es && start_rabbitmq ;;
  down)
    stop_es
    if amqp_up; then rabbitmqctl -q stop >/dev/null 2>&1 && log "stopped RabbitMQ"; fi
    ;;
  status)
    es_up && echo "elasticsearch: up (127.0.0.1:$ES_PORT)" || echo "elasticsearch: down"
    amqp_up && echo "rabbitmq: up (127.0.0.1:$AMQP_PORT)" || echo "rabbitmq: down"
    ;;
  *)
    echo "usage: $0 up|down|status" >&2
    exit 2
    ;;
esac

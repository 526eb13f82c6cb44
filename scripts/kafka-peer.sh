#!/usr/bin/env bash
# The reference peer: genuine Apache Kafka 4.4.0 (broker, controller, CLI tools, clients), run
# beside ringlog so that tests can check ringlog against what Kafka itself does.
#
#   kafka-peer.sh fetch                      download the jars (a no-op once complete)
#   kafka-peer.sh classpath                  print the classpath (broker, tools, clients,
#                                            Streams, Connect runtime), all Kafka 4.4.0
#   kafka-peer.sh classpath connect          print the classpath of a Connect worker with the
#                                            FileStream connectors and MirrorMaker 2 (4.3.1,
#                                            see CONNECT_PLUGINS_VERSION)
#   kafka-peer.sh start single DIR PORT [OPTS]       one KRaft node (broker+controller) on
#                                                    127.0.0.1:PORT
#   kafka-peer.sh start cluster DIR BASEPORT [OPTS]  three such nodes, on BASEPORT..BASEPORT+2
#   kafka-peer.sh stop DIR                   stop what `start` started under DIR
#   kafka-peer.sh tool NAME [ARGS...]        run a CLI tool by its script name (kafka-topics, ...)
#
# start OPTS: --durable (log.flush.interval.messages=1), --prop KEY=VALUE (repeatable; added
# after the defaults, so it overrides them). Ports: a single node's controller listens on
# PORT+1; a cluster's controllers on BASEPORT+3..BASEPORT+5. A node's data, server.properties,
# kafka.pid and kafka.log lie in DIR (single) or DIR/node1..3 (cluster); a DIR that was started
# before is started again with its data. `start` returns once every node answers.
#
# The jars come from Maven Central by Maven (scripts/provision.sh installs it) into
# ${RINGLOG_PEER_CACHE:-~/.cache/ringlog-peer}/kafka-4.4.0, outside the repository. When they
# cannot be had here (no Java, no Maven, no repository) every subcommand exits 3 with one line
# on stderr that starts "kafka-peer: unavailable:", for tests to skip with.
# Environment: RINGLOG_PEER_CACHE, RINGLOG_PEER_HEAP (broker -Xmx, default 512m),
# RINGLOG_PEER_START_TIMEOUT (s, default 90), RINGLOG_PEER_STOP_TIMEOUT (s, default 30),
# RINGLOG_PEER_FETCH_LIMIT_SECS (the most one Maven fetch may take, default 240: below the
# 300 s the tests give a peer to start, so that they report this script's reason).
set -euo pipefail

KAFKA_VERSION=4.4.0
LOG4J_VERSION=2.25.5 # the log4j-core that kafka-server 4.4.0 depends on
SLF4J_VERSION=2.0.17 # Kafka's poms name slf4j 1.7; log4j-slf4j2-impl needs 2.x
# Kafka 4.4.0 published no connect-file, connect-mirror or connect-mirror-client to Maven
# Central. Those come from the newest release that has them, with that release's Connect
# runtime and clients: they do not run on 4.4.0's clients, which moved classes they use
# (org.apache.kafka.common.utils.AppInfoParser and Exit went to ...utils.internals).
CONNECT_PLUGINS_VERSION=4.3.1
CACHE_ROOT=${RINGLOG_PEER_CACHE:-$HOME/.cache/ringlog-peer}
FETCH_LIMIT_SECS=${RINGLOG_PEER_FETCH_LIMIT_SECS:-240}
CACHE=$CACHE_ROOT/kafka-$KAFKA_VERSION
LIBS=$CACHE/libs
CONNECT_CACHE=$CACHE_ROOT/connect-$CONNECT_PLUGINS_VERSION
JAVA=${JAVA:-java}
START_TIMEOUT=${RINGLOG_PEER_START_TIMEOUT:-90}
STOP_TIMEOUT=${RINGLOG_PEER_STOP_TIMEOUT:-30}
# Fixed JVM options: a modest heap (the machine is shared with builds), Kafka's own G1 settings
# for the broker, and the serial collector for short-lived tools (least start-up work).
BROKER_JVM=(-Xms256m "-Xmx${RINGLOG_PEER_HEAP:-512m}" -XX:+UseG1GC -XX:MaxGCPauseMillis=20
  -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true)
TOOL_JVM=(-Xmx512m -XX:+UseSerialGC -Djava.awt.headless=true)

# Script name -> main class, as Kafka 4.4's bin/*.sh have them.
declare -A TOOLS=(
  [kafka-topics]=org.apache.kafka.tools.TopicCommand
  [kafka-configs]=org.apache.kafka.tools.ConfigCommand
  [kafka-acls]=org.apache.kafka.tools.AclCommand
  [kafka-consumer-groups]=org.apache.kafka.tools.consumer.group.ConsumerGroupCommand
  [kafka-share-groups]=org.apache.kafka.tools.consumer.group.ShareGroupCommand
  [kafka-groups]=org.apache.kafka.tools.GroupsCommand
  [kafka-streams-groups]=org.apache.kafka.tools.streams.StreamsGroupCommand
  [kafka-transactions]=org.apache.kafka.tools.TransactionsCommand
  [kafka-reassign-partitions]=org.apache.kafka.tools.reassign.ReassignPartitionsCommand
  [kafka-leader-election]=org.apache.kafka.tools.LeaderElectionCommand
  [kafka-log-dirs]=org.apache.kafka.tools.LogDirsCommand
  [kafka-get-offsets]=org.apache.kafka.tools.GetOffsetShell
  [kafka-delete-records]=org.apache.kafka.tools.DeleteRecordsCommand
  [kafka-features]=org.apache.kafka.tools.FeatureCommand
  [kafka-metadata-quorum]=org.apache.kafka.tools.MetadataQuorumCommand
  [kafka-broker-api-versions]=org.apache.kafka.tools.BrokerApiVersionsCommand
  [kafka-cluster]=org.apache.kafka.tools.ClusterTool
  [kafka-client-metrics]=org.apache.kafka.tools.ClientMetricsCommand
  [kafka-delegation-tokens]=org.apache.kafka.tools.DelegationTokenCommand
  [kafka-console-producer]=org.apache.kafka.tools.ConsoleProducer
  [kafka-console-consumer]=org.apache.kafka.tools.consumer.ConsoleConsumer
  [kafka-console-share-consumer]=org.apache.kafka.tools.consumer.ConsoleShareConsumer
  [kafka-verifiable-producer]=org.apache.kafka.tools.VerifiableProducer
  [kafka-verifiable-consumer]=org.apache.kafka.tools.VerifiableConsumer
  [kafka-producer-perf-test]=org.apache.kafka.tools.ProducerPerformance
  [kafka-consumer-perf-test]=org.apache.kafka.tools.ConsumerPerformance
  [kafka-e2e-latency]=org.apache.kafka.tools.EndToEndLatency
  [kafka-streams-application-reset]=org.apache.kafka.tools.StreamsResetter
  [kafka-dump-log]=org.apache.kafka.tools.DumpLogSegments
  [kafka-storage]=kafka.tools.StorageTool
)

usage() {
  cat >&2 <<EOF
usage: $0 fetch
       $0 classpath [connect]
       $0 start single DIR PORT [--durable] [--prop KEY=VALUE]...
       $0 start cluster DIR BASEPORT [--durable] [--prop KEY=VALUE]...
       $0 stop DIR
       $0 tool NAME [ARGS...]
NAME is one of:
$(printf '%s\n' "${!TOOLS[@]}" | sort | xargs | fold -s -w 92 | sed 's/^/  /')
EOF
  exit 2
}
die() { echo "kafka-peer: $*" >&2; exit 1; }
unavailable() { echo "kafka-peer: unavailable: $*" >&2; exit 3; }

# The artifacts of the peer (group:artifact:version), and of the Connect worker that runs the
# plugins Kafka 4.4.0 did not publish.
peer_artifacts() {
  local a
  for a in kafka_2.13 kafka-tools kafka-server kafka-storage kafka-clients kafka-streams \
    connect-api connect-runtime connect-json connect-transforms; do
    echo "org.apache.kafka:$a:$KAFKA_VERSION"
  done
  logging_artifacts
}
connect_artifacts() {
  local a
  for a in kafka-clients connect-api connect-runtime connect-json connect-transforms \
    connect-file connect-mirror connect-mirror-client; do
    echo "org.apache.kafka:$a:$CONNECT_PLUGINS_VERSION"
  done
  logging_artifacts
}
logging_artifacts() {
  echo "org.slf4j:slf4j-api:$SLF4J_VERSION"
  local a
  for a in log4j-api log4j-core log4j-slf4j2-impl; do
    echo "org.apache.logging.log4j:$a:$LOG4J_VERSION"
  done
}

pom() { # ARTIFACTS_FUNCTION
  local deps="" a g n v
  for a in $("$1"); do
    IFS=: read -r g n v <<<"$a"
    deps+="    <dependency><groupId>$g</groupId><artifactId>$n</artifactId>"
    deps+="<version>$v</version></dependency>"$'\n'
  done
  cat <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>ringlog</groupId><artifactId>kafka-peer</artifactId><version>1</version>
  <packaging>pom</packaging>
  <dependencies>
$deps  </dependencies>
</project>
EOF
}

# Log4j 2 configurations: the broker logs INFO to stdout (its kafka.log), tools WARN+ to stderr
# so that their stdout is only their answer.
log4j_config() { # LEVEL TARGET
  cat <<EOF
status = warn
appender.c.type = Console
appender.c.name = C
appender.c.target = $2
appender.c.layout.type = PatternLayout
appender.c.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = $1
rootLogger.appenderRef.c.ref = C
logger.request.name = kafka.request.logger
logger.request.level = WARN
EOF
}

fetch() {
  fetch_set "$CACHE" peer_artifacts "Apache Kafka $KAFKA_VERSION"
}
fetch_connect() {
  fetch_set "$CONNECT_CACHE" connect_artifacts "Kafka Connect $CONNECT_PLUGINS_VERSION"
}

# Downloads the jars ARTIFACTS_FUNCTION names (and theirs) into DIR/libs, once.
fetch_set() { # DIR ARTIFACTS_FUNCTION WHAT
  local dir=$1 libs=$1/libs want have=""
  command -v "$JAVA" >/dev/null 2>&1 || unavailable "no java (Java 17+); scripts/provision.sh installs it"
  # What a complete fetch wrote, hashed: a change to the script's list refetches.
  want=$({ pom "$2"; log4j_config INFO SYSTEM_OUT; log4j_config WARN SYSTEM_ERR; } | sha256sum | cut -d' ' -f1)
  [ -f "$dir/complete" ] && have=$(cat "$dir/complete")
  [ "$want" = "$have" ] && [ -d "$libs" ] && return 0
  command -v mvn >/dev/null 2>&1 || unavailable "no Maven (mvn); scripts/provision.sh installs it"
  mkdir -p "$dir"
  # Tests run in parallel: one fetch at a time, and the others then find it done.
  exec 9>"$dir/fetch.lock"
  flock 9
  [ -f "$dir/complete" ] && [ "$(cat "$dir/complete")" = "$want" ] && { exec 9>&-; return 0; }
  rm -rf "$dir/complete" "$libs.tmp"
  pom "$2" >"$dir/pom.xml"
  log4j_config INFO SYSTEM_OUT >"$dir/log4j2-broker.properties"
  log4j_config WARN SYSTEM_ERR >"$dir/log4j2-tools.properties"
  echo "kafka-peer: fetching $3 with Maven into $dir" >&2
  # -U: retry what an earlier, failed fetch left marked as missing in ~/.m2.
  local rc=0
  # Maven does not inherit the fetch lock (fd 9): a fetch killed with this script must not
  # keep the lock from the next one.
  timeout --kill-after=10 "$FETCH_LIMIT_SECS" mvn -B -q -U -f "$dir/pom.xml" 9>&- \
    org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies \
    -DincludeScope=runtime -DoutputDirectory="$libs.tmp" >"$dir/fetch.log" 2>&1 || rc=$?
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    unavailable "Maven did not fetch $3 within $FETCH_LIMIT_SECS s (Maven Central slow or unreachable?); see $dir/fetch.log"
  fi
  if [ "$rc" -ne 0 ]; then
    # A repository that cannot be reached is "unavailable" for tests to skip on; anything else
    # (an artifact that is not there, say) is a real failure.
    local net='Could not transfer|Unknown ?host|Connection refused|Connect timed out|Read timed out'
    net+='|Network is unreachable|No route to host|name resolution|Remote host terminated'
    if grep -qiE "$net" "$dir/fetch.log"; then
      unavailable "Maven could not download $3 (no repository reachable?); see $dir/fetch.log"
    fi
    die "Maven failed; see $dir/fetch.log"
  fi
  rm -rf "$libs" "$dir/cds" && mv "$libs.tmp" "$libs" # archives of old jars are of no use
  echo "$want" >"$dir/complete"
  exec 9>&-
}

# A tool runs with the client compiler only (it lives for seconds) and, unless
# RINGLOG_PEER_TOOL_CDS=0, an application class-data archive of its own classes: the first run
# of each tool writes CACHE/cds/NAME.jsa (Java 17's -XX:ArchiveClassesAtExit), later runs map it
# and start in about a third of the time. The JVM's own messages (a stale archive's warning,
# say) go to stderr, never into a tool's answer on stdout.
run_tool() { # NAME MAIN ARGS... (execs, except on the run that writes the archive)
  local jsa=$CACHE/cds/$1.jsa rc
  local jvm=("${TOOL_JVM[@]}" -XX:TieredStopAtLevel=1 -XX:-UsePerfData
    -Dlog4j2.configurationFile="$CACHE/log4j2-tools.properties" -cp "$LIBS/*")
  shift
  if [ "${RINGLOG_PEER_TOOL_CDS:-1}" != 0 ]; then
    jvm=(-Xlog:disable -Xlog:all=warning:stderr -Xlog:cds*=error:stderr "${jvm[@]}")
    if [ -s "$jsa" ]; then
      jvm=(-XX:SharedArchiveFile="$jsa" "${jvm[@]}")
    elif mkdir -p "$CACHE/cds" 2>/dev/null; then
      # Written under a name of its own and renamed once whole (a JVM killed by a signal may
      # have left half of one, which would crash the JVMs that map it): a tool run beside it
      # never maps half an archive.
      "$JAVA" -XX:ArchiveClassesAtExit="$jsa.$$" "${jvm[@]}" "$@" && rc=0 || rc=$?
      if [ "$rc" -lt 128 ] && [ -s "$jsa.$$" ]; then mv -f "$jsa.$$" "$jsa"; else rm -f "$jsa.$$"; fi
      exit "$rc"
    fi
  fi
  exec "$JAVA" "${jvm[@]}" "$@"
}

# Writes NODE_DIR/server.properties. VOTERS: the static controller quorum, id@host:port,...
node_props() { # NODE_DIR ID PORT CONTROLLER_PORT VOTERS RF
  local dir=$1 rf=$6 p
  {
    cat <<EOF
process.roles=broker,controller
node.id=$2
controller.quorum.voters=$5
listeners=PLAINTEXT://127.0.0.1:$3,CONTROLLER://127.0.0.1:$4
advertised.listeners=PLAINTEXT://127.0.0.1:$3
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
inter.broker.listener.name=PLAINTEXT
controller.listener.names=CONTROLLER
log.dirs=$dir/data
num.partitions=1
offsets.topic.replication.factor=$rf
transaction.state.log.replication.factor=$rf
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=$rf
share.coordinator.state.topic.min.isr=1
min.insync.replicas=1
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=false
EOF
    # ringlog does not auto-create topics unless asked; neither does the peer (--prop overrides).
    [ "$durable" = 1 ] && echo "log.flush.interval.messages=1"
    for p in "${props[@]}"; do echo "$p"; done
  } >"$dir/server.properties"
}

# Formats NODE_DIR's log dir once (a restarted DIR keeps its data), then starts the node.
start_node() { # NODE_DIR CLUSTER_ID
  local dir=$1 pid
  if [ -f "$dir/kafka.pid" ] && kill -0 "$(cat "$dir/kafka.pid")" 2>/dev/null; then
    die "a node already runs in $dir (pid $(cat "$dir/kafka.pid")); stop it first"
  fi
  if [ ! -f "$dir/data/meta.properties" ]; then
    "$JAVA" "${TOOL_JVM[@]}" -Dlog4j2.configurationFile="$CACHE/log4j2-tools.properties" \
      -cp "$LIBS/*" "${TOOLS[kafka-storage]}" format -t "$2" -c "$dir/server.properties" \
      >"$dir/format.log" 2>&1 || { cat "$dir/format.log" >&2; die "formatting $dir failed"; }
  fi
  "$JAVA" "${BROKER_JVM[@]}" -Dlog4j2.configurationFile="$CACHE/log4j2-broker.properties" \
    -cp "$LIBS/*" kafka.Kafka "$dir/server.properties" </dev/null >"$dir/kafka.log" 2>&1 &
  pid=$!
  echo "$pid" >"$dir/kafka.pid"
}

# Waits until each node logged that it started and its client port accepts. A node that exits
# or does not start in time fails the whole start, which then stops what it started under ROOT.
wait_nodes() { # ROOT NODE_DIR:PORT...
  local root=$1 deadline=$((SECONDS + START_TIMEOUT)) n dir port ready why=""
  shift
  while :; do
    ready=0
    for n in "$@"; do
      dir=${n%:*} port=${n##*:}
      if grep -q 'Kafka Server started' "$dir/kafka.log" && (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
        ready=$((ready + 1))
      elif ! kill -0 "$(cat "$dir/kafka.pid")" 2>/dev/null; then
        why="exited while starting"
      elif [ "$SECONDS" -ge "$deadline" ]; then
        why="did not start within ${START_TIMEOUT}s"
      fi
      if [ -n "$why" ]; then
        grep -m 3 -A 2 -E '\] (ERROR|FATAL) ' "$dir/kafka.log" >&2 || tail -n 20 "$dir/kafka.log" >&2
        STOP_TIMEOUT=5 stop "$root" # a failed start keeps nothing worth a clean shutdown
        die "the node in $dir $why (log: $dir/kafka.log)"
      fi
    done
    [ "$ready" -lt $# ] || return 0
    sleep 0.2
  done
}

# A Kafka cluster id: 16 random bytes, base64url without padding, not starting with '-'
# (the CLI would read it as an option), as Uuid.randomUuid makes them.
cluster_id() { # DIR
  if [ ! -f "$1/cluster.id" ]; then
    local id="-"
    while [ "${id:0:1}" = "-" ]; do id=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '='); done
    echo "$id" >"$1/cluster.id"
  fi
  cat "$1/cluster.id"
}

start() {
  [ $# -ge 3 ] || usage
  local mode=$1 dir=$2 port=$3 id i voters="" nodes=()
  shift 3
  [[ $port =~ ^[0-9]+$ ]] || usage
  local durable=0 props=() # read by node_props
  while [ $# -gt 0 ]; do
    case $1 in
      --durable) durable=1 ;;
      --prop) [ $# -ge 2 ] && [[ $2 == *=* ]] || usage; props+=("$2"); shift ;;
      *) usage ;;
    esac
    shift
  done
  fetch
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  id=$(cluster_id "$dir")
  case $mode in
    single)
      node_props "$dir" 1 "$port" $((port + 1)) "1@127.0.0.1:$((port + 1))" 1
      start_node "$dir" "$id"
      wait_nodes "$dir" "$dir:$port"
      ;;
    cluster)
      for i in 1 2 3; do voters+="${voters:+,}$i@127.0.0.1:$((port + 2 + i))"; done
      for i in 1 2 3; do
        mkdir -p "$dir/node$i"
        node_props "$dir/node$i" "$i" $((port + i - 1)) $((port + 2 + i)) "$voters" 3
        start_node "$dir/node$i" "$id"
        nodes+=("$dir/node$i:$((port + i - 1))")
      done
      wait_nodes "$dir" "${nodes[@]}"
      ;;
    *) usage ;;
  esac
}

# SIGTERM to each node started under DIR (only a pid whose command line names DIR's
# server.properties: a stale pid file may name someone else's process now), SIGKILL to those
# still running after STOP_TIMEOUT seconds.
stop() {
  [ $# -eq 1 ] || usage
  local f pid props pids=() deadline
  for f in "$1/kafka.pid" "$1"/node*/kafka.pid; do
    [ -f "$f" ] || continue
    pid=$(cat "$f") props="$(dirname "$(realpath "$f")")/server.properties"
    if tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -qF "$props"; then
      kill -TERM "$pid" 2>/dev/null && pids+=("$pid")
    fi
    rm -f "$f"
  done
  deadline=$((SECONDS + STOP_TIMEOUT))
  for pid in "${pids[@]}"; do
    while kill -0 "$pid" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.2; done
    kill -KILL "$pid" 2>/dev/null || true
  done
  # Reap our own children (none unless start ran in this same shell).
  wait 2>/dev/null || true
}

[ $# -ge 1 ] || usage
cmd=$1
shift
case $cmd in
  fetch) [ $# -eq 0 ] || usage; fetch ;;
  classpath)
    case ${1:-} in
      "") [ $# -eq 0 ] || usage; fetch; libs=$LIBS ;;
      connect) [ $# -eq 1 ] || usage; fetch_connect; libs=$CONNECT_CACHE/libs ;;
      *) usage ;;
    esac
    ls "$libs"/*.jar | tr '\n' ':' | sed 's/:$/\n/'
    ;;
  start) start "$@" ;;
  stop) stop "$@" ;;
  tool)
    [ $# -ge 1 ] && [ -n "${TOOLS[$1]:-}" ] || usage
    name=$1 main=${TOOLS[$1]}
    shift
    fetch
    run_tool "$name" "$main" "$@"
    ;;
  *) usage ;;
esac

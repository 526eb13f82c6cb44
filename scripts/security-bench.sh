#!/usr/bin/env bash
# Issue #19's benchmark, one broker and one core: produce throughput and p99 over a PLAINTEXT
# listener against a SASL_SSL one (SCRAM-SHA-512, TLS 1.3) of the same broker, `ringlog-bench
# --compare` in alternating rounds (the max-rate workload); then the TLS handshake rate of the
# one core (`openssl s_time`: new sessions, full handshakes, for SECS seconds).
#
# usage: scripts/security-bench.sh RINGLOG RINGLOG_BENCH [SECS] [ROUNDS]
# Reports in $OUT (default /tmp/ringlog-security-bench).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/bench-common.sh"
bin=$1 bench=$2 secs=${3:-20} rounds=${4:-3}
bench_init security
bench_out security

# A test CA and a server certificate for 127.0.0.1.
ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
openssl req -x509 "${ec[@]}" -keyout "$work/ca.key" -out "$work/ca.pem" -days 2 \
  -subj /CN=bench-ca 2>/dev/null
openssl req "${ec[@]}" -keyout "$work/server.key" -out "$work/server.csr" -subj /CN=localhost 2>/dev/null
echo "subjectAltName=IP:127.0.0.1,DNS:localhost" >"$work/ext.cnf"
openssl x509 -req -in "$work/server.csr" -CA "$work/ca.pem" -CAkey "$work/ca.key" \
  -CAcreateserial -out "$work/server.pem" -days 2 -extfile "$work/ext.cnf" 2>/dev/null

plain=$((19100 + RANDOM % 400)) secure=$((19600 + RANDOM % 400)) admin=$((20100 + RANDOM % 400))
"$bin" serve --data-dir "$work/data" --cores 1 \
  --listener "INTERNAL=PLAINTEXT://127.0.0.1:$plain" \
  --listener "EXTERNAL=SASL_SSL://127.0.0.1:$secure" \
  --tls-cert "$work/server.pem" --tls-key "$work/server.key" \
  --allow-everyone-if-no-acl-found --metrics-listen "127.0.0.1:$admin" >"$work/broker.log" 2>&1 &
pids+=($!)
bench_wait_ready "$bin" "127.0.0.1:$plain" || true
"$bin" user create bench --password bench-pw --admin "127.0.0.1:$admin" >/dev/null

echo "== produce: A = PLAINTEXT :$plain, B = SASL_SSL (SCRAM-SHA-512) :$secure"
"$bench" -b "127.0.0.1:$plain" --compare "127.0.0.1:$secure" --rounds "$rounds" \
  -w bench/workloads/1-topic-6-partitions-1kb-2p-2c-max-rate.yaml \
  --duration-secs "$secs" --warmup-secs 5 --acks all -o "$out/produce" --quiet \
  --compare-client-config security.protocol=SASL_SSL \
  --compare-client-config "ssl.ca.location=$work/ca.pem" \
  --compare-client-config sasl.mechanism=SCRAM-SHA-512 \
  --compare-client-config sasl.username=bench \
  --compare-client-config sasl.password=bench-pw | tee "$out/produce.txt"

echo "== TLS handshakes on one core: openssl s_time -new for $secs s"
openssl s_time -connect "127.0.0.1:$secure" -new -time "$secs" -CAfile "$work/ca.pem" \
  2>&1 | grep -E "connections|connections/user" | tee "$out/handshakes.txt"

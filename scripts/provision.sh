#!/usr/bin/env bash
# Installs what the test suite needs on a fresh machine of this kind (Debian/Ubuntu), each only
# when missing: kcat (the kcat tests), the python3 venv module (the tests build their own venv
# of confluent-kafka and kafka-python from PyPI), node and npm (kafkajs, installed by its test),
# Java 17 (the reference Kafka broker, its tools, the Java client, Streams, Connect and
# MirrorMaker 2), Maven (scripts/kafka-peer.sh fetches all of their jars from Maven Central with
# it, see docs/java-client.md),
# openssl (the TLS tests make their certificates; libssl-dev for the bench's librdkafka), and
# cargo-nextest. System packages need root (or sudo).
# Called by scripts/test.sh (the README's test command) and by .ci/run.
set -euo pipefail
. "$(dirname "$0")/install-step.sh"

need=()
command -v kcat >/dev/null 2>&1 || need+=(kcat)
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || need+=(python3-venv)
command -v npm >/dev/null 2>&1 || need+=(nodejs npm)
command -v java >/dev/null 2>&1 || need+=(openjdk-17-jre-headless)
command -v javac >/dev/null 2>&1 || need+=(openjdk-17-jdk-headless)
command -v mvn >/dev/null 2>&1 || need+=(maven)
command -v openssl >/dev/null 2>&1 || need+=(openssl)
# ringlog-bench's librdkafka links the system's OpenSSL (TLS and SASL/SCRAM benchmarks).
[ -f /usr/include/openssl/ssl.h ] || need+=(libssl-dev)
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
if [ ${#need[@]} -gt 0 ]; then
  echo "provision: installing ${need[*]}" >&2
  sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
      sudo=(sudo)
    else
      echo "provision: ${need[*]} missing and not root: run as root, or apt-get install -y ${need[*]}" >&2
      exit 1
    fi
  fi
  export DEBIAN_FRONTEND=noninteractive
  # sudo asks for its password here, in the foreground, not under a time limit.
  [ ${#sudo[@]} -eq 0 ] || sudo -v
  by_hand="apt-get update && apt-get install -y ${need[*]} (as root; after an interrupted install, dpkg --configure -a first)"
  install_step "the package lists (apt-get update)" "$APT_UPDATE_LIMIT_SECS" "$by_hand" \
    "${sudo[@]}" apt-get update -q
  install_step "${need[*]}" "$APT_INSTALL_LIMIT_SECS" "$by_hand" \
    "${sudo[@]}" apt-get install -y -q "${need[@]}"
fi

if ! cargo nextest --version >/dev/null 2>&1; then
  echo "provision: installing cargo-nextest" >&2
  install_step cargo-nextest "$CARGO_INSTALL_LIMIT_SECS" "cargo install cargo-nextest --locked" \
    cargo install cargo-nextest --locked
fi

# mdBook builds docs/ as one book; the docs test builds it (about 2 minutes to install on
# 2 cores; without its default features: no local server or file watcher).
if ! mdbook --version >/dev/null 2>&1; then
  echo "provision: installing mdbook" >&2
  install_step mdbook "$CARGO_INSTALL_LIMIT_SECS" \
    "cargo install mdbook --locked --no-default-features" \
    cargo install mdbook --locked --no-default-features
fi

# Sourced by the scripts that install what ringlog's tests need (provision.sh, fuzz.sh,
# .ci/run): runs one install command under a time limit. When it fails or runs out of time,
# it says what could not be installed, why, and how to install it by hand, then exits 1: a
# fresh machine that cannot reach a package source stops with that message instead of
# hanging.

# The time limits, in seconds, of each kind of install (generous for 2 cores).
APT_UPDATE_LIMIT_SECS=${APT_UPDATE_LIMIT_SECS:-300}
APT_INSTALL_LIMIT_SECS=${APT_INSTALL_LIMIT_SECS:-1200}
CARGO_INSTALL_LIMIT_SECS=${CARGO_INSTALL_LIMIT_SECS:-1800}
RUSTUP_LIMIT_SECS=${RUSTUP_LIMIT_SECS:-600}

install_step() { # WHAT LIMIT_SECS HOW_BY_HAND COMMAND...
  local what=$1 limit_secs=$2 by_hand=$3 rc=0
  shift 3
  timeout --kill-after=10 "$limit_secs" "$@" || rc=$?
  [ "$rc" -eq 0 ] && return 0
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    echo "install: $what did not finish within $limit_secs s (is its package source reachable from this machine?)." >&2
  else
    echo "install: $what failed (\`$*\` exited $rc; its output is above)." >&2
  fi
  echo "install: to install it by hand: $by_hand" >&2
  exit 1
}

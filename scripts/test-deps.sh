#!/usr/bin/env bash
# Installs what the test suite needs beyond Go and the PostgreSQL binaries: OpenSSH's sshd for
# the tests that run against a real sshd. Idempotent; needs root (CI and these machines are).
set -euo pipefail
need=()
command -v /usr/sbin/sshd >/dev/null 2>&1 || need+=(openssh-server)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "test-deps: need ${need[*]}; install them (apt-get install ${need[*]}) or run as root" >&2
    exit 1
  fi
  echo "test-deps: installing ${need[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

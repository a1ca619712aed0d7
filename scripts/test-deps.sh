#!/usr/bin/env bash
# Installs what the test suite needs beyond Go and the PostgreSQL binaries: OpenSSH's sshd for
# the tests that run against a real sshd, Debian's chromium for the dashboard's browser tests
# (e2e/dashboard), the TypeScript MCP SDK that e2e/agent's TypeScript client runs with node
# (e2e/mcpclient-ts) and playwright-core for the browser tests (e2e/browser), each pinned by
# its package-lock.json. Idempotent; installing packages needs root (CI and these machines are).
set -euo pipefail
cd "$(dirname "$0")/.."
need=()
command -v /usr/sbin/sshd >/dev/null 2>&1 || need+=(openssh-server)
# The browser tests launch exactly /usr/bin/chromium (playwright-core downloads no browser).
[ -x /usr/bin/chromium ] || need+=(chromium)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "test-deps: need ${need[*]}; install them (apt-get install ${need[*]}) or run as root" >&2
    exit 1
  fi
  echo "test-deps: installing ${need[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# The node packages' modules (the TypeScript MCP client, the browser tests): installed from
# the lock file when missing, or when the lock file is newer than the installed tree (a
# bumped pin).
for ts in e2e/mcpclient-ts e2e/browser; do
  if [ ! -d "$ts/node_modules" ] || [ "$ts/package-lock.json" -nt "$ts/node_modules/.package-lock.json" ]; then
    if ! command -v npm >/dev/null 2>&1; then
      echo "test-deps: need node (20 or later) and npm on PATH for $ts" >&2
      exit 1
    fi
    echo "test-deps: npm ci in $ts"
    npm ci --prefix "$ts" --no-audit --no-fund
  fi
done

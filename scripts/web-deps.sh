# Sourced by build-web.sh and test-web.sh, from api/web: checks that npm is on PATH, then npm ci
# from the lock file when the installed tree is missing or older than the lock. $1 names the
# calling script in messages.
if ! command -v npm >/dev/null 2>&1; then
  echo "$1: need node (20 or later) and npm on PATH for the dashboard (api/web)" >&2
  exit 1
fi
if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  echo "$1: npm ci in api/web"
  npm ci --no-audit --no-fund
fi

#!/usr/bin/env bash
# test-beside.sh JOB… -- MAIN…: runs each JOB in the background, its output kept in a log,
# while MAIN runs in the foreground; then prints each job's log, with its status, and exits
# non-zero if MAIN or any job failed. make test uses it to run lint and the dashboard's unit
# tests beside the fuzz targets, which have no timing of their own to disturb.
set -uo pipefail
jobs=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do jobs+=("$1"); shift; done
if [ $# -lt 2 ]; then
  echo "usage: test-beside.sh JOB… -- MAIN…" >&2
  exit 2
fi
shift
logdir=$(mktemp -d)
trap 'rm -rf "$logdir"' EXIT
pids=()
for i in "${!jobs[@]}"; do
  "${jobs[$i]}" >"$logdir/$i.log" 2>&1 &
  pids+=($!)
done
"$@"
main=$?
failed=0
for i in "${!jobs[@]}"; do
  wait "${pids[$i]}"
  rc=$?
  echo
  echo "== ${jobs[$i]} (exit $rc)"
  cat "$logdir/$i.log"
  [ "$rc" -eq 0 ] || failed=1
done
if [ "$main" -ne 0 ]; then
  echo "test-beside: $* failed (exit $main)" >&2
  exit "$main"
fi
if [ "$failed" -ne 0 ]; then
  echo "test-beside: a job beside the Go suite failed (see above)" >&2
  exit 1
fi

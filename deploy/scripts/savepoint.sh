#!/usr/bin/env bash
# The periodic-savepoint loop operators run against Flink (e.g. from a
# CronJob), unchanged against ferry: take the first job, trigger a savepoint
# into TARGET, poll until it completes, and print its location (a directory
# holding _metadata). Needs curl and jq.
#
#   deploy/scripts/savepoint.sh [JOBMANAGER] TARGET
#   deploy/scripts/savepoint.sh 127.0.0.1:8081 file:///var/lib/ferry/savepoints
#   deploy/scripts/savepoint.sh 127.0.0.1:8081 s3://bucket/savepoints
set -euo pipefail
if [ $# -eq 1 ]; then jm=127.0.0.1:8081; target=$1; else jm=$1; target=${2:?TARGET directory}; fi
api="http://$jm"

job=$(curl -sSf "$api/jobs" | jq -r '.jobs[0].id')
[ -n "$job" ] && [ "$job" != null ] || { echo "no job at $api" >&2; exit 1; }

request=$(curl -sSf -X POST -H 'Content-Type: application/json' \
  -d "$(jq -n --arg t "$target" '{"target-directory": $t, "cancel-job": false}')" \
  "$api/jobs/$job/savepoints" | jq -r '."request-id"')

for _ in $(seq 1 600); do
  status=$(curl -sSf "$api/jobs/$job/savepoints/$request")
  if [ "$(jq -r '.status.id' <<<"$status")" = COMPLETED ]; then
    location=$(jq -r '.operation.location // empty' <<<"$status")
    if [ -z "$location" ]; then
      echo "savepoint failed: $(jq -c '.operation."failure-cause"' <<<"$status")" >&2
      exit 1
    fi
    case "$location" in
      file:*|/*)
        dir=${location#file://}
        dir=${dir#file:}
        [ -f "$dir/_metadata" ] || { echo "$dir has no _metadata" >&2; exit 1; } ;;
      # An object store: COMPLETED means ferry wrote _metadata (create-only,
      # last) and it answered; there is no local file to look at.
      *) ;;
    esac
    echo "$location"
    exit 0
  fi
  sleep 1
done
echo "savepoint $request did not complete in time" >&2
exit 1

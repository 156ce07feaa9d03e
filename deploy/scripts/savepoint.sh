#!/usr/bin/env bash
# The periodic-savepoint loop operators run against Flink (e.g. from a
# CronJob), unchanged against ferry: take the first job, trigger a savepoint
# into TARGET, poll until it completes, and print its location (a directory
# holding _metadata). Needs curl and jq.
#
#   deploy/scripts/savepoint.sh [JOBMANAGER] TARGET
#   deploy/scripts/savepoint.sh 127.0.0.1:8081 file:///var/lib/ferry/savepoints
#   deploy/scripts/savepoint.sh 127.0.0.1:8081 s3://bucket/savepoints
#   deploy/scripts/savepoint.sh https://ferry.example:8081 s3://bucket/savepoints
#
# A secured REST API (docs/security.md) takes the variables `ferry list`
# reads: FERRY_SECURITY_SSL_REST_TRUSTSTORE (curl --cacert),
# FERRY_SECURITY_SSL_REST_KEYSTORE and FERRY_SECURITY_SSL_REST_PRIVATE_KEY
# (--cert / --key: the client certificate for mutual TLS), and
# FERRY_SECURITY_REST_TOKEN_FILE (the bearer token, handed to curl through
# a file descriptor, never on a command line).
set -euo pipefail
if [ $# -eq 1 ]; then jm=127.0.0.1:8081; target=$1; else jm=$1; target=${2:?TARGET directory}; fi
case $jm in http://*|https://*) api=${jm%/} ;; *) api="http://$jm" ;; esac

opts=(-sSf)
[ -z "${FERRY_SECURITY_SSL_REST_TRUSTSTORE:-}" ] || opts+=(--cacert "$FERRY_SECURITY_SSL_REST_TRUSTSTORE")
[ -z "${FERRY_SECURITY_SSL_REST_KEYSTORE:-}" ] || opts+=(--cert "$FERRY_SECURITY_SSL_REST_KEYSTORE")
[ -z "${FERRY_SECURITY_SSL_REST_PRIVATE_KEY:-}" ] || opts+=(--key "$FERRY_SECURITY_SSL_REST_PRIVATE_KEY")
curl() {
  if [ -n "${FERRY_SECURITY_REST_TOKEN_FILE:-}" ]; then
    command curl "${opts[@]}" -K <(printf 'header = "Authorization: Bearer %s"\n' \
      "$(tr -d '\r\n' <"$FERRY_SECURITY_REST_TOKEN_FILE")") "$@"
  else
    command curl "${opts[@]}" "$@"
  fi
}

job=$(curl "$api/jobs" | jq -r '.jobs[0].id')
[ -n "$job" ] && [ "$job" != null ] || { echo "no job at $api" >&2; exit 1; }

request=$(curl -X POST -H 'Content-Type: application/json' \
  -d "$(jq -n --arg t "$target" '{"target-directory": $t, "cancel-job": false}')" \
  "$api/jobs/$job/savepoints" | jq -r '."request-id"')

for _ in $(seq 1 600); do
  status=$(curl "$api/jobs/$job/savepoints/$request")
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

#!/usr/bin/env bash
# Sends one structured-mode CloudEvent file to a running drift-sentinel.
#   examples/send-event.sh examples/events/revision-update.ce.json [http://localhost:8080/]
# With ingest behind a static token (auth.bearerToken), set INGEST_TOKEN to it.
set -euo pipefail
file=${1:?usage: send-event.sh EVENT.json [URL]}
url=${2:-http://localhost:8080/}
auth=()
if [ -n "${INGEST_TOKEN:-}" ]; then
  auth=(-H "Authorization: Bearer $INGEST_TOKEN")
fi
curl -sS -o /dev/stderr -w 'HTTP %{http_code}\n' -X POST "$url" "${auth[@]}" \
  -H 'Content-Type: application/cloudevents+json' --data-binary "@$file"

#!/usr/bin/env bash
# Sends one structured-mode CloudEvent file to a running drift-sentinel.
#   examples/send-event.sh examples/events/revision-update.ce.json [http://localhost:8080/]
set -euo pipefail
file=${1:?usage: send-event.sh EVENT.json [URL]}
url=${2:-http://localhost:8080/}
curl -sS -o /dev/stderr -w 'HTTP %{http_code}\n' -X POST "$url" \
  -H 'Content-Type: application/cloudevents+json' --data-binary "@$file"

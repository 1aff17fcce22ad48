#!/usr/bin/env bash
# Stop the services brought up by up.sh, each by the PIDs it recorded.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
export GRAMTILE_SERVICES="${GRAMTILE_SERVICES:-/tmp/gramtile-services}"
[ -d "$GRAMTILE_SERVICES" ] || exit 0
for s in "$here"/*.sh; do
  case "$(basename "$s")" in up.sh|down.sh) continue ;; esac
  bash "$s" stop || true
done

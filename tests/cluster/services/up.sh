#!/usr/bin/env bash
# Bring up the services of the `cluster` tests on 127.0.0.1: every tests/cluster/services/*.sh
# but this one and down.sh, each called as `NAME.sh start` (as root; elsewhere a note and exit 0,
# and the cluster tests skip with the reason). State and logs go to $GRAMTILE_SERVICES.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
export GRAMTILE_SERVICES="${GRAMTILE_SERVICES:-/tmp/gramtile-services}"
if [ "$(id -u)" != 0 ]; then
  echo "note: cluster services need root (apt-get, munged, slurmd); the cluster tests will skip"
  exit 0
fi
mkdir -p "$GRAMTILE_SERVICES"
for s in "$here"/*.sh; do
  case "$(basename "$s")" in up.sh|down.sh) continue ;; esac
  bash "$s" start
done

#!/usr/bin/env bash
# An S3-protocol server on 127.0.0.1 for the `cluster` tests: moto's server mode (PyPI package
# `moto[server]`, in the `test` extra, so `make setup` installs it into .venv; up.sh puts the
# venv's bin first on PATH). Buckets live in the server's memory and vanish when it stops.
#
#   s3.sh start   start it in the background (PID in $GRAMTILE_SERVICES/s3/pid, log beside it), wait
#                 until it answers (at most 30 s), write $GRAMTILE_SERVICES/s3.env (AWS_ENDPOINT_URL,
#                 AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_DEFAULT_REGION)
#   s3.sh stop    stop it by its recorded PID and remove s3.env
set -euo pipefail
SERVICES="${GRAMTILE_SERVICES:-/tmp/gramtile-services}"
state="$SERVICES/s3"
pidfile="$state/pid"
envfile="$SERVICES/s3.env"
py="${PYTHON:-python3}"
command -v python >/dev/null 2>&1 && py=python

stop() {
  rm -f "$envfile"
  [ -f "$pidfile" ] || return 0
  pid="$(cat "$pidfile")"
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$pidfile"
}

start() {
  stop
  mkdir -p "$state"
  if ! "$py" -c "import moto.server, flask" 2>/dev/null; then
    echo "s3.sh: moto's server mode is not installed for $py. Fix: make setup (or pip install 'moto[server]')" >&2
    exit 1
  fi
  # a free port on the loopback interface
  port="$("$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
  # its own session, so that neither a Ctrl-C in the terminal nor the end of `make` stops it.
  # TCP_NODELAY on the server's sockets: werkzeug writes a response's headers and body apart, and on
  # loopback the body then waits for the client's delayed ACK, 40 ms on every GET (13 ms with it)
  setsid "$py" -c 'import sys, werkzeug.serving as s; s.WSGIRequestHandler.disable_nagle_algorithm = True
from moto.server import main; main(sys.argv[1:])' -H 127.0.0.1 -p "$port" >"$state/moto.log" 2>&1 < /dev/null &
  echo $! >"$pidfile"
  url="http://127.0.0.1:$port"
  for _ in $(seq 1 300); do  # at most 30 s
    if "$py" - "$url" <<'EOF' 2>/dev/null
import sys, urllib.request
urllib.request.urlopen(sys.argv[1] + "/moto-api/", timeout=1).read()
EOF
    then
      cat >"$envfile" <<EOF
# the S3-protocol server of the cluster tests (moto, PID $(cat "$pidfile")); written by tests/cluster/services/s3.sh
AWS_ENDPOINT_URL=$url
AWS_ACCESS_KEY_ID=gramtile-test
AWS_SECRET_ACCESS_KEY=gramtile-test-secret
AWS_DEFAULT_REGION=us-east-1
EOF
      echo "s3: moto S3-protocol server at $url (pid $(cat "$pidfile"))"
      return 0
    fi
    if ! kill -0 "$(cat "$pidfile")" 2>/dev/null; then
      echo "s3.sh: the moto server exited at start; its log $state/moto.log ends:" >&2
      tail -5 "$state/moto.log" >&2
      rm -f "$pidfile"
      exit 1
    fi
    sleep 0.1
  done
  echo "s3.sh: the moto server did not answer at $url within 30 s (log: $state/moto.log)" >&2
  stop
  exit 1
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac

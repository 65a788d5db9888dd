#!/usr/bin/env bash
# A local Bazel HTTP remote cache: Debian's nginx with WebDAV PUT, listening on loopback only.
#
#   tools/remote_cache/serve.sh start [--port 9092] [--dir ~/.cache/accelerated_modules/remote_cache] [--write-bazelrc]
#   tools/remote_cache/serve.sh stop  [--dir ...]      # kills the nginx master by the PID it wrote
#   tools/remote_cache/serve.sh status [--dir ...]
#
# --write-bazelrc appends `build:remote_cache --remote_cache=http://127.0.0.1:PORT` to .bazelrc.user, so
# `./bazelw build --config=remote_cache ...` uses it. Other checkouts (or machines that can reach it) share
# build outputs through it: Bazel's action keys do not depend on the checkout path.
# Needs the `nginx` Debian package (./bazelw installs it).
set -euo pipefail
cmd="${1:-}"; shift || true
port=9092
dir="${HOME:-/tmp}/.cache/accelerated_modules/remote_cache"
write_rc=0
while [ $# -gt 0 ]; do
  case "$1" in
    --port) port="$2"; shift 2 ;;
    --dir) dir="$2"; shift 2 ;;
    --write-bazelrc) write_rc=1; shift ;;
    *) echo "serve.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
nginx_bin="$(command -v nginx || echo /usr/sbin/nginx)"
pidfile="$dir/nginx.pid"

case "$cmd" in
  start)
    [ -x "$nginx_bin" ] || { echo "serve.sh: nginx not found (apt-get install nginx)" >&2; exit 1; }
    mkdir -p "$dir/cas" "$dir/tmp"
    user_line=""
    [ "$(id -u)" -eq 0 ] && user_line="user root;"
    cat >"$dir/nginx.conf" <<CONF
$user_line
worker_processes 1;
pid $pidfile;
error_log $dir/error.log warn;
events { worker_connections 512; }
http {
  access_log off;
  client_body_temp_path $dir/tmp;
  proxy_temp_path $dir/tmp;
  fastcgi_temp_path $dir/tmp;
  uwsgi_temp_path $dir/tmp;
  scgi_temp_path $dir/tmp;
  client_max_body_size 0;
  server {
    listen 127.0.0.1:$port;
    root $dir/cas;
    location / {
      dav_methods PUT;
      create_full_put_path on;
      dav_access user:rw group:rw all:r;
    }
  }
}
CONF
    "$nginx_bin" -p "$dir" -c "$dir/nginx.conf" -e "$dir/error.log"
    for _ in $(seq 50); do [ -s "$pidfile" ] && break; sleep 0.1; done
    echo "remote cache: http://127.0.0.1:$port (pid $(cat "$pidfile"), data in $dir/cas)"
    if [ "$write_rc" -eq 1 ]; then
      root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
      echo "build:remote_cache --remote_cache=http://127.0.0.1:$port" >>"$root/.bazelrc.user"
      echo "wrote build:remote_cache to $root/.bazelrc.user"
    fi
    ;;
  stop)
    if [ -s "$pidfile" ]; then
      pid="$(cat "$pidfile")"
      kill "$pid" && echo "stopped remote cache (pid $pid)"
    else
      echo "serve.sh: no pid file at $pidfile" >&2; exit 1
    fi
    ;;
  status)
    if [ -s "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then echo "running (pid $(cat "$pidfile"))"; else echo "not running"; exit 1; fi
    ;;
  *)
    echo "usage: $0 start|stop|status [--port P] [--dir D] [--write-bazelrc]" >&2; exit 2 ;;
esac

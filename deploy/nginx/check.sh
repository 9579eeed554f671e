#!/usr/bin/env bash
# `make nginx-check`: `nginx -t` on every example of deploy/nginx/, with the nginx operators
# run (nginx-light from Debian's packages, installed when missing: 1.22 on Debian 12) and a
# throwaway certificate in place of the certbot paths. Each example is checked as it would be
# installed: included into an http block, alone.
set -euo pipefail
cd "$(dirname "$0")"
if ! command -v nginx >/dev/null; then
  apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends nginx-light >/dev/null
fi
nginx -v
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=example.org \
  -keyout "$work/privkey.pem" -out "$work/fullchain.pem" 2>/dev/null
for conf in *.conf; do
  sed -E "s#/etc/letsencrypt/live/[^/]+/#$work/#" "$conf" > "$work/site.conf"
  cat > "$work/nginx.conf" <<CONF
pid $work/nginx.pid;
error_log stderr;
events {}
http {
    access_log off;
    include $work/site.conf;
}
CONF
  nginx -t -q -p "$work" -e stderr -c "$work/nginx.conf" || { echo "nginx -t failed on deploy/nginx/$conf" >&2; exit 1; }
  echo "nginx -t: deploy/nginx/$conf is accepted"
done

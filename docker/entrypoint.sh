#!/bin/sh
# Entrypoint of the latencyboard image. The image has no default role: the command says what runs
# (docker/compose.yaml sets one per service), e.g.
#
#   uvicorn latencyboard.asgi:application --host 0.0.0.0 --port 8000 --lifespan off   # web
#   python -m ingest --host 0.0.0.0 --http-port 4318 --grpc-port 4317                   # ingest
#   celery -A latencyboard worker                                                       # worker
#   celery -A latencyboard beat                                                         # beat (1 only)
#   python manage.py migrate --noinput                                                  # one-shot
#
# Before running the command it refuses to start while any environment value still holds a
# CHANGE-ME placeholder from docker/.env.example.
#
# `latencyboard-entrypoint healthcheck URL` is the probe used by the compose healthchecks (the slim
# image has no curl): GET URL must answer 200 within 5 s. It sends the first ALLOWED_HOSTS entry as
# Host (Django rejects unknown hosts) and X-Forwarded-Proto: https (so SECURE_SSL_REDIRECT does not
# answer 301), and it never follows redirects.
set -eu

usage() {
    sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//' >&2
}

if [ "$#" -eq 0 ]; then
    echo "latencyboard: no command given; the image runs one role per container:" >&2
    usage
    exit 64
fi

if [ "$1" = "healthcheck" ]; then
    shift
    exec python - "$@" <<'PY'
import os
import sys
import urllib.error
import urllib.request

if len(sys.argv) != 2:
    sys.exit("usage: latencyboard-entrypoint healthcheck URL")
url = sys.argv[1]

hosts = os.environ.get("ALLOWED_HOSTS", "")
if os.environ.get("ALLOWED_HOSTS_FILE"):
    with open(os.environ["ALLOWED_HOSTS_FILE"], encoding="utf-8") as f:
        hosts = f.read()
host = next(
    (h.strip().lstrip(".") for h in hosts.split(",") if h.strip() not in ("", "*", ".")),
    None,
)


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


headers = {"X-Forwarded-Proto": "https", "User-Agent": "latencyboard-healthcheck"}
if host:
    headers["Host"] = host
opener = urllib.request.build_opener(NoRedirect)
try:
    with opener.open(urllib.request.Request(url, headers=headers), timeout=5) as response:
        status = response.status
except urllib.error.HTTPError as exc:
    location = exc.headers.get("Location")
    sys.exit(f"unhealthy: {url} answered {exc.code}" + (f" -> {location}" if location else ""))
except OSError as exc:
    sys.exit(f"unhealthy: {url}: {exc}")
if status != 200:
    sys.exit(f"unhealthy: {url} answered {status}")
PY
fi

placeholders=$(env | grep -i 'CHANGE-ME' | cut -d= -f1 | sort -u | tr '\n' ' ' || true)
if [ -n "$placeholders" ]; then
    echo "latencyboard: refusing to start, these variables still hold a CHANGE-ME placeholder" \
        "from docker/.env.example: $placeholders" >&2
    exit 78
fi

exec "$@"

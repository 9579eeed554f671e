#!/usr/bin/env bash
# `make image-check`: build the container image through the real Dockerfile, on this machine,
# without a Docker daemon or an image registry, and run it:
#
#   1. buildah and mmdebstrap from Debian's packages (apt-get) when they are missing;
#   2. a Debian bookworm base (mmdebstrap: python3, python3-venv, ca-certificates) made into
#      the local image localhost/codemojex-base:bookworm (kept for the next run;
#      IMAGE_CHECK_NEW_BASE=1 makes it again);
#   3. a wheelhouse for the base's own Python (read from the base: 3.11.2 on bookworm, whose
#      version markers differ from this machine's 3.11), resolved from constraints.txt with
#      uv and downloaded here, so that the build needs no registry and no pip settings;
#   4. `buildah bud` of the Dockerfile with BASE=that base, PIP_NO_INDEX=1 (the wheelhouse
#      only), in Docker's format (OCI's has no HEALTHCHECK);
#   5. in the image, as its user (never root): no compiler and no pip; `codemojex migrate` on
#      a new database of the Postgres on 127.0.0.1; a short `codemojex demo`; a `codemojex
#      worker` whose image HEALTHCHECK passes and which exits 0 on SIGTERM.
#
# `podman run` fails here (setrlimit is not permitted): `buildah run --isolation chroot` runs
# the commands, sharing this machine's network. Everything is removed after but the base.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$SECONDS

PY=${PY:-.venv/bin/python}
UV_VERSION=${UV_VERSION:?the uv version of the Makefile}
PG_ADMIN_URL=${CODEMOJEX_TEST_PG_ADMIN_URL:-postgresql://postgres@127.0.0.1:5432/postgres}
REDIS_URL=${CODEMOJEX_TEST_REDIS_URL:-redis://127.0.0.1:6379/0}
WORK=build/image-check
BASE=localhost/codemojex-base:bookworm
ID=$$-$RANDOM
TAG=localhost/codemojex:check-$ID
DB=cmimage_${ID//-/_}
QUEUE=imgcheck$ID
RUN=(buildah run --isolation chroot)

say() { printf '\n== %s (%d s)\n' "$*" $((SECONDS - started)); }

containers=()
worker_pid=
cleanup() {
  [[ -n $worker_pid ]] && kill "$worker_pid" 2>/dev/null
  for ctr in "${containers[@]}"; do buildah rm "$ctr" >/dev/null 2>&1 || true; done
  buildah rmi "$TAG" >/dev/null 2>&1 || true
  psql "$PG_ADMIN_URL" -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null 2>&1 || true
  redis-cli -u "$REDIS_URL" --scan --pattern "*{$QUEUE}*" | xargs -r redis-cli -u "$REDIS_URL" del >/dev/null || true
  rm -rf wheelhouse "$WORK"
  buildah rmi --prune >/dev/null 2>&1 || true  # a base made again leaves the old one untagged
}
trap cleanup EXIT

say "tools"
if ! command -v buildah >/dev/null || ! command -v mmdebstrap >/dev/null; then
  apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q buildah mmdebstrap >/dev/null
fi
buildah --version
mkdir -p "$WORK"

say "base image $BASE"
if [[ -n ${IMAGE_CHECK_NEW_BASE:-} ]] || ! buildah inspect --type image "$BASE" >/dev/null 2>&1; then
  mmdebstrap --quiet --variant=minbase --include=python3,python3-venv,ca-certificates \
    bookworm "$WORK/base.tar"
  ctr=$(buildah from scratch)
  containers+=("$ctr")
  buildah add --quiet "$ctr" "$WORK/base.tar" / >/dev/null
  buildah commit --quiet "$ctr" "$BASE" >/dev/null
  rm -f "$WORK/base.tar"
fi
probe=$(buildah from "$BASE")
containers+=("$probe")
python_version=$("${RUN[@]}" "$probe" -- python3 -c 'import platform; print(platform.python_version())')
echo "the base's Python: $python_version"

say "wheelhouse for Python $python_version"
"$PY" -m pip install -q "uv==$UV_VERSION" 2> >(grep -v "is ignored: it is neither" >&2)
"$(dirname "$PY")/uv" pip compile --quiet --no-header --no-annotate pyproject.toml --extra demo \
  --python-version "$python_version" --python-platform "$(uname -m)-unknown-linux-gnu" \
  -c constraints.txt -o "$WORK/requirements.txt"
"$PY" -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["build-system"]["requires"]))' \
  > "$WORK/build-requirements.txt"
rm -rf wheelhouse
pip_download=("$PY" -m pip download -q --disable-pip-version-check --dest wheelhouse
  --only-binary :all: --python-version "$python_version")
# (This machine's pip settings name find-links folders that may be missing: not a problem.)
"${pip_download[@]}" --no-deps -r "$WORK/requirements.txt" 2> >(grep -v "is ignored: it is neither" >&2)
"${pip_download[@]}" -r "$WORK/build-requirements.txt" 2> >(grep -v "is ignored: it is neither" >&2)
echo "wheels: $(find wheelhouse -name '*.whl' | wc -l)"

say "buildah bud (the Dockerfile, BASE=$BASE)"
buildah bud --quiet --isolation chroot --format docker --build-arg "BASE=$BASE" \
  --build-arg PIP_NO_INDEX=1 --build-arg "REVISION=$(git rev-parse HEAD)" -t "$TAG" . >/dev/null
buildah images --format '{{.Name}}:{{.Tag}} {{.Size}}' "$TAG"
ctr=$(buildah from "$TAG")
containers+=("$ctr")
echo "the virtual environment: $("${RUN[@]}" "$ctr" -- du -sh /opt/codemojex | cut -f1)"

say "the user, and no build tools"
uid=$("${RUN[@]}" "$ctr" -- id -u)
[[ $uid != 0 ]] || { echo "the image runs as root" >&2; exit 1; }
"${RUN[@]}" "$ctr" -- sh -c '! command -v gcc && ! command -v cc && ! python3 -c "import pip" 2>/dev/null' \
  || { echo "a compiler or pip in the final image" >&2; exit 1; }
echo "uid $uid; no compiler, no pip"

say "codemojex migrate (a new database on 127.0.0.1)"
psql "$PG_ADMIN_URL" -qc "CREATE DATABASE $DB"
DATABASE_URL="postgresql+asyncpg://postgres@127.0.0.1:5432/$DB"
"${RUN[@]}" --env "CODEMOJEX_DATABASE_URL=$DATABASE_URL" "$ctr" -- codemojex migrate
psql "${PG_ADMIN_URL%/*}/$DB" -tAc 'SELECT version_num FROM alembic_version' | xargs echo "at revision"

say "codemojex demo --seconds 8"
"${RUN[@]}" "$ctr" -- codemojex demo --seconds 8 > "$WORK/demo.out"
grep -q "Lanes invariants after the run: all hold" "$WORK/demo.out" \
  || { cat "$WORK/demo.out"; exit 1; }
tail -n 3 "$WORK/demo.out"

say "codemojex worker: the HEALTHCHECK, then SIGTERM"
metrics_port=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
env_args=(--env "CODEMOJEX_DATABASE_URL=$DATABASE_URL" --env "CODEMOJEX_REDIS_URL=$REDIS_URL"
  --env "CODEMOJEX_QUEUE=$QUEUE" --env CODEMOJEX_TOKEN=1:image-check
  --env "CODEMOJEX_BOT_API_BASE_URL=http://127.0.0.1:9/bot" --env "CODEMOJEX_METRICS_PORT=$metrics_port")
"${RUN[@]}" "${env_args[@]}" "$ctr" -- codemojex worker > "$WORK/worker.log" 2>&1 &
worker_pid=$!
# The image's own HEALTHCHECK command, as Docker would run it.
mapfile -d '' check < <(buildah inspect --type image "$TAG" | "$PY" -c \
  'import json, sys; sys.stdout.write("\0".join(json.load(sys.stdin)["Docker"]["config"]["Healthcheck"]["Test"][1:]))')
healthy=
for _ in $(seq 1 60); do
  if "${RUN[@]}" --env "CODEMOJEX_METRICS_PORT=$metrics_port" "$ctr" -- "${check[@]}" 2>/dev/null; then
    healthy=1
    break
  fi
  sleep 1
done
[[ -n $healthy ]] || { cat "$WORK/worker.log"; echo "the HEALTHCHECK never passed" >&2; exit 1; }
echo "healthy"
# buildah does not pass signals on: SIGTERM goes to codemojex itself, as `docker stop` sends it
# to the container's PID 1.
codemojex_under() {  # the codemojex process among the descendants of $1
  local queue=("$1") pid child
  while ((${#queue[@]})); do
    pid=${queue[0]}
    queue=("${queue[@]:1}")
    for child in $(pgrep -P "$pid"); do
      [[ $(cat "/proc/$child/comm" 2>/dev/null) == codemojex ]] && { echo "$child"; return; }
      queue+=("$child")
    done
  done
}
target=$(codemojex_under "$worker_pid")
[[ -n $target ]] || { echo "no codemojex process under buildah" >&2; exit 1; }
kill -TERM "$target"
rc=0
wait "$worker_pid" || rc=$?
worker_pid=
if [[ $rc != 0 ]] || ! grep -q "worker stopped" "$WORK/worker.log"; then
  cat "$WORK/worker.log"
  echo "the worker did not stop cleanly on SIGTERM (exit $rc)" >&2
  exit 1
fi
echo "exit 0 after SIGTERM: $(grep -o 'worker stopped' "$WORK/worker.log")"

say "image-check passed"

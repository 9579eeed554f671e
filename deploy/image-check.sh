#!/usr/bin/env bash
# `make image-check`: build the container image through the real Dockerfile, on this machine,
# without a Docker daemon or an image registry, and run it:
#
#   1. buildah and mmdebstrap from Debian's packages (apt-get) when they are missing;
#   2. a Debian bookworm base (mmdebstrap: python3, python3-venv, ca-certificates) made into
#      the local image localhost/codemojex-base:bookworm-pip (kept for the next run;
#      IMAGE_CHECK_NEW_BASE=1 makes it again), with pip and setuptools in its Python's
#      /usr/local as the official python image has them (from Debian's own wheels of them),
#      so that the check sees the final stage remove a base's pip;
#   3. a wheelhouse for the base's own Python (read from the base: 3.11.2 on bookworm, whose
#      version markers differ from this machine's 3.11), resolved from constraints.txt with
#      uv and downloaded here, with deploy/image-build.txt's pins, so that the build needs no
#      registry and no pip settings;
#   4. `buildah bud` of the Dockerfile with BASE=that base, PIP_NO_INDEX=1 (the wheelhouse
#      only), in Docker's format (OCI's has no HEALTHCHECK): the production image (no extra),
#      then, with IMAGE_CHECK_DEMO=1, the demo's (EXTRAS=demo), whose dependencies' layer alone
#      is new (a minute more: CI leaves it out; tests/test_installed.py runs the demo from the
#      wheel);
#   5. in the image, as its user (never root): no compiler, and no pip, setuptools or wheel in
#      either Python; no demo extra, and `codemojex demo` says in one line how to get it;
#      `codemojex migrate` on a new database of the Postgres on 127.0.0.1; a `codemojex
#      worker` under the image's entrypoint (dumb-init) whose HEALTHCHECK passes and which
#      exits 0 on SIGTERM sent to that init, as `docker stop` sends it; in the demo's image
#      (IMAGE_CHECK_DEMO=1) a short `codemojex demo`;
#   6. the default base (python:3.11-slim-bookworm) when the image registry can be reached:
#      built, and checked for no pip, setuptools or wheel; when it cannot, one line says so.
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
BASE=localhost/codemojex-base:bookworm-pip
DEFAULT_BASE=docker.io/library/python:3.11-slim-bookworm
ID=$$-$RANDOM
TAG=localhost/codemojex:check-$ID
DEMO_TAG=localhost/codemojex:check-demo-$ID
DEFAULT_TAG=localhost/codemojex:check-default-$ID
DB=cmimage_${ID//-/_}
QUEUE=imgcheck$ID
RUN=(buildah run --isolation chroot)

say() { printf '\n== %s (%d s)\n' "$*" $((SECONDS - started)); }

containers=()
worker_pid=
cleanup() {
  [[ -n $worker_pid ]] && kill "$worker_pid" 2>/dev/null
  for ctr in "${containers[@]}"; do buildah rm "$ctr" >/dev/null 2>&1 || true; done
  buildah rmi "$TAG" "$DEMO_TAG" "$DEFAULT_TAG" >/dev/null 2>&1 || true
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
  # Debian's python3-venv brings pip's and setuptools' wheels: unpacked into /usr/local's
  # site-packages they are the system Python's pip and setuptools, with their RECORD, as on
  # the official image (which has no EXTERNALLY-MANAGED marker either).
  "${RUN[@]}" "$ctr" -- sh -ec '
    site=$(python3 -c "import site; print(site.getsitepackages()[0])")
    mkdir -p "$site"
    for wheel in /usr/share/python-wheels/pip-*.whl /usr/share/python-wheels/setuptools-*.whl; do
      python3 -m zipfile -e "$wheel" "$site"
    done
    rm -f /usr/lib/python3*/EXTERNALLY-MANAGED
    python3 -m pip --version'
  buildah commit --quiet "$ctr" "$BASE" >/dev/null
  rm -f "$WORK/base.tar"
fi
probe=$(buildah from "$BASE")
containers+=("$probe")
python_version=$("${RUN[@]}" "$probe" -- python3 -c 'import platform; print(platform.python_version())')
echo "the base's Python: $python_version"

# wheelhouse/ for a Python version: every dependency (the demo extra's too) at the versions
# constraints.txt pins for that version's markers, and deploy/image-build.txt's pins.
wheelhouse_for() {
  local version=$1
  "$(dirname "$PY")/uv" pip compile --quiet --no-header --no-annotate pyproject.toml --extra demo \
    --python-version "$version" --python-platform "$(uname -m)-unknown-linux-gnu" \
    -c constraints.txt -o "$WORK/requirements.txt"
  grep -v '^#' deploy/image-build.txt >> "$WORK/requirements.txt"
  rm -rf wheelhouse
  # (This machine's pip settings name find-links folders that may be missing: not a problem.)
  "$PY" -m pip download -q --disable-pip-version-check --dest wheelhouse --only-binary :all: \
    --python-version "$version" --no-deps -r "$WORK/requirements.txt" \
    2> >(grep -v "is ignored: it is neither" >&2)
  echo "wheels: $(find wheelhouse -name '*.whl' | wc -l)"
}

say "wheelhouse for Python $python_version"
"$PY" -m pip install -q "uv==$UV_VERSION" 2> >(grep -v "is ignored: it is neither" >&2)
wheelhouse_for "$python_version"

bud() {  # bud TAG BASE [--build-arg …]: the Dockerfile, from the wheelhouse alone
  local tag=$1 base=$2
  shift 2
  buildah bud --quiet --isolation chroot --format docker --build-arg "BASE=$base" \
    --build-arg PIP_NO_INDEX=1 --build-arg "REVISION=$(git rev-parse HEAD)" "$@" -t "$tag" . >/dev/null
  buildah images --format '{{.Name}}:{{.Tag}} {{.Size}}' "$tag"
}

no_build_tools() {  # no_build_tools CONTAINER: no compiler; no pip, setuptools, wheel anywhere
  "${RUN[@]}" "$1" -- sh -c '! command -v gcc && ! command -v cc && ! command -v pip && ! command -v pip3' >/dev/null \
    || { echo "a compiler or pip in the final image" >&2; exit 1; }
  for python in python3 /opt/codemojex/bin/python; do
    "${RUN[@]}" "$1" -- "$python" -c '
import importlib.util, sys
found = [m for m in ("pip", "setuptools", "wheel") if importlib.util.find_spec(m)]
sys.exit(f"{sys.executable}: {found}" if found else 0)' || { echo "build tools left in the final image" >&2; exit 1; }
  done
}

say "buildah bud (the Dockerfile, BASE=$BASE)"
bud "$TAG" "$BASE"
ctr=$(buildah from "$TAG")
containers+=("$ctr")
echo "the virtual environment: $("${RUN[@]}" "$ctr" -- du -sh /opt/codemojex | cut -f1)"

say "the user, no build tools, no demo extra"
uid=$("${RUN[@]}" "$ctr" -- id -u)
[[ $uid != 0 ]] || { echo "the image runs as root" >&2; exit 1; }
no_build_tools "$ctr"
"${RUN[@]}" "$ctr" -- python3 -c 'import importlib.util as u, sys; sys.exit(u.find_spec("fakeredis") is not None)' \
  || { echo "the demo extra is in the production image" >&2; exit 1; }
# (buildah adds two lines of its own about the exit status: left out)
set +e
"${RUN[@]}" "$ctr" -- codemojex demo 2>&1 | grep -v -e '^subprocess exited with status' \
  -e '^Error: exit status' > "$WORK/demo.out"
rc=${PIPESTATUS[0]}
set -e
[[ $rc == 2 && $(wc -l < "$WORK/demo.out") == 1 ]] && grep -qF "pip install 'codemojex[demo]'" "$WORK/demo.out" \
  || { cat "$WORK/demo.out"; echo "codemojex demo without its extra: not the one line (exit $rc)" >&2; exit 1; }
echo "uid $uid; no compiler, no pip, setuptools or wheel; without the demo extra: $(cat "$WORK/demo.out")"

say "codemojex migrate (a new database on 127.0.0.1)"
psql "$PG_ADMIN_URL" -qc "CREATE DATABASE $DB"
DATABASE_URL="postgresql+asyncpg://postgres@127.0.0.1:5432/$DB"
"${RUN[@]}" --env "CODEMOJEX_DATABASE_URL=$DATABASE_URL" "$ctr" -- codemojex migrate
psql "${PG_ADMIN_URL%/*}/$DB" -tAc 'SELECT version_num FROM alembic_version' | xargs echo "at revision"

say "codemojex worker under the image's entrypoint: the HEALTHCHECK, then SIGTERM"
image_config() {  # image_config KEY: the image's config KEY's list, NUL-separated
  buildah inspect --type image "$TAG" | "$PY" -c \
    'import json, sys; sys.stdout.write("\0".join(json.load(sys.stdin)["Docker"]["config"][sys.argv[1]]))' "$1"
}
mapfile -d '' entrypoint < <(image_config Entrypoint)
[[ ${entrypoint[0]} == dumb-init ]] || { echo "the image runs no init: ${entrypoint[*]}" >&2; exit 1; }
metrics_port=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
env_args=(--env "CODEMOJEX_DATABASE_URL=$DATABASE_URL" --env "CODEMOJEX_REDIS_URL=$REDIS_URL"
  --env "CODEMOJEX_QUEUE=$QUEUE" --env CODEMOJEX_TOKEN=1:image-check
  --env "CODEMOJEX_BOT_API_BASE_URL=http://127.0.0.1:9/bot" --env "CODEMOJEX_METRICS_PORT=$metrics_port")
"${RUN[@]}" "${env_args[@]}" "$ctr" -- "${entrypoint[@]}" worker > "$WORK/worker.log" 2>&1 &
worker_pid=$!
# The image's own HEALTHCHECK command, as Docker would run it.
mapfile -d '' check < <(buildah inspect --type image "$TAG" | "$PY" -c \
  'import json, sys; sys.stdout.write("\0".join(json.load(sys.stdin)["Docker"]["config"]["Healthcheck"]["Test"][1:]))')
within_a_minute() {  # within_a_minute WHAT COMMAND…: until COMMAND succeeds, a minute at most
  local what=$1
  shift
  for _ in $(seq 1 60); do
    "$@" 2>/dev/null && return
    sleep 1
  done
  cat "$WORK/worker.log"
  echo "$what: not within a minute" >&2
  exit 1
}
within_a_minute "the HEALTHCHECK" \
  "${RUN[@]}" --env "CODEMOJEX_METRICS_PORT=$metrics_port" "$ctr" -- "${check[@]}"
echo "healthy"
# /healthz answers from the first second; the worker runs once /readyz says ready.
within_a_minute "/readyz ready" "${RUN[@]}" "$ctr" -- python3 -c \
  "import urllib.request as u; u.urlopen('http://127.0.0.1:$metrics_port/readyz', timeout=4)"
echo "ready"
# buildah does not pass signals on: SIGTERM goes to the init itself, as `docker stop` sends it
# to the container's PID 1, and the init passes it on to codemojex.
process_under() {  # process_under PID NAME: the process NAME among the descendants of PID
  local queue=("$1") pid child
  while ((${#queue[@]})); do
    pid=${queue[0]}
    queue=("${queue[@]:1}")
    for child in $(pgrep -P "$pid"); do
      [[ $(cat "/proc/$child/comm" 2>/dev/null) == "$2" ]] && { echo "$child"; return; }
      queue+=("$child")
    done
  done
}
target=$(process_under "$worker_pid" dumb-init)
[[ -n $target ]] || { echo "no dumb-init process under buildah" >&2; exit 1; }
[[ -n $(process_under "$target" codemojex) ]] || { echo "no codemojex under dumb-init" >&2; exit 1; }
kill -TERM "$target"
rc=0
wait "$worker_pid" || rc=$?
worker_pid=
if [[ $rc != 0 ]] || ! grep -q "worker stopped" "$WORK/worker.log"; then
  cat "$WORK/worker.log"
  echo "the worker did not stop cleanly on SIGTERM (exit $rc)" >&2
  exit 1
fi
echo "exit 0 after SIGTERM to the init: $(grep -o 'worker stopped' "$WORK/worker.log")"

if [[ -n ${IMAGE_CHECK_DEMO:-} ]]; then
  say "the demo's image (EXTRAS=demo): codemojex demo --seconds 8"
  bud "$DEMO_TAG" "$BASE" --build-arg EXTRAS=demo
  demo=$(buildah from "$DEMO_TAG")
  containers+=("$demo")
  no_build_tools "$demo"
  "${RUN[@]}" "$demo" -- codemojex demo --seconds 8 > "$WORK/demo.out"
  grep -q "Lanes invariants after the run: all hold" "$WORK/demo.out" \
    || { cat "$WORK/demo.out"; exit 1; }
  tail -n 3 "$WORK/demo.out"
else
  say "the demo's image: not built (IMAGE_CHECK_DEMO=1 builds it with EXTRAS=demo and runs the demo in it)"
fi

say "the default base $DEFAULT_BASE"
if pulled=$(timeout 60 buildah pull --quiet "$DEFAULT_BASE" 2>&1); then
  probe=$(buildah from "$DEFAULT_BASE")
  containers+=("$probe")
  version=$("${RUN[@]}" "$probe" -- python3 -c 'import platform; print(platform.python_version())')
  wheelhouse_for "$version"
  bud "$DEFAULT_TAG" "$DEFAULT_BASE"
  default=$(buildah from "$DEFAULT_TAG")
  containers+=("$default")
  no_build_tools "$default"
  "${RUN[@]}" "$default" -- codemojex --help > /dev/null
  echo "built on $DEFAULT_BASE (Python $version): no pip, setuptools or wheel"
else
  echo "NOT BUILT on the default base: $DEFAULT_BASE cannot be pulled from here (no image" \
    "registry reachable: ${pulled##*$'\n'}); the image was checked on the Debian base alone"
fi

say "image-check passed"

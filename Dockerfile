# syntax=docker/dockerfile:1
# Codemojex: one image for every process. The command picks it:
#   docker run IMAGE bot | worker | sender | ops | migrate     (codemojex --help lists them)
# compose.yaml and deploy/kubernetes/ run it; `make image-check` builds it here.
#
# BASE: the official slim Python by default; any base with Python >= 3.11 and `python3 -m
# venv` will do (make image-check builds on a Debian bookworm from mmdebstrap, and on the
# default base when the image registry can be reached). Every stage starts from it, so the
# virtual environment built in one runs on the last one's Python.
# EXTRAS: the package's extras, none by default; `--build-arg EXTRAS=demo` for an image that
# runs `codemojex demo` too (the production image carries no fakeredis, no rich).
ARG BASE=python:3.11-slim-bookworm

# The build context (.dockerignore: what builds the package, and wheelhouse/ when there is one).
FROM ${BASE} AS sources
COPY . /src
RUN mkdir -p /src/wheelhouse

FROM ${BASE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_ROOT_USER_ACTION=ignore
WORKDIR /src
# Wheels only, at the versions of constraints.txt and deploy/image-build.txt: nothing is
# compiled, so no compiler here or below. A wheelhouse/ in the build context is looked in
# first; with PIP_NO_INDEX=1 it is the only source (make image-check: no package registry).
ARG PIP_NO_INDEX=0
ARG EXTRAS=""
ENV PIP_FIND_LINKS=/src/wheelhouse
# The dependencies first, in a layer of their own, from the files that name them alone: a
# change to the code builds from the package's step on, keeping this layer.
COPY --from=sources /src/pyproject.toml /src/constraints.txt /src/
COPY --from=sources /src/deploy/image-build.txt /src/deploy/
COPY --from=sources /src/wheelhouse /src/wheelhouse
RUN python3 -m venv /opt/codemojex \
    && /opt/codemojex/bin/python -c 'import sys, tomllib; project = tomllib.load(open("pyproject.toml", "rb"))["project"]; extras = sys.argv[1].replace(",", " ").split(); print("\n".join(project["dependencies"] + [d for e in extras for d in project["optional-dependencies"][e]]))' "$EXTRAS" > /tmp/requirements.txt \
    && /opt/codemojex/bin/python -m pip install --only-binary :all: -c constraints.txt \
        -c deploy/image-build.txt -r /tmp/requirements.txt setuptools wheel dumb-init
# The package itself, built from the context without build isolation (the pinned backend
# above), installed without dependencies (all there); then the build tools go: no pip, no
# setuptools, no wheel in the environment the image runs.
COPY --from=sources /src /src
RUN /opt/codemojex/bin/python -m pip wheel --no-deps --no-build-isolation --wheel-dir /tmp/dist . \
    && /opt/codemojex/bin/python -m pip install --no-deps "$(echo /tmp/dist/codemojex-*.whl)" \
    && /opt/codemojex/bin/python -m pip uninstall --yes setuptools wheel pip \
    && /opt/codemojex/bin/codemojex --help > /dev/null

FROM ${BASE}
ARG VERSION=0.1.0
ARG REVISION=unknown
LABEL org.opencontainers.image.title="codemojex" \
      org.opencontainers.image.description="Emoji code-breaking game for Telegram group chats: bot, worker, sender, ops page, migrations" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="MIT"
# The base's own pip, setuptools and wheel go too (the official image has them in its
# Python; a Debian base has none): nothing in the image installs packages. A user of its
# own, by number too, so that Kubernetes' runAsNonRoot can tell.
RUN if python3 -m pip --version > /dev/null 2>&1; then \
        python3 -m pip uninstall --yes --root-user-action=ignore pip setuptools wheel; \
    fi \
    && useradd --uid 10001 --user-group --no-log-init --create-home --home-dir /home/codemojex \
        --shell /usr/sbin/nologin codemojex
COPY --from=build /opt/codemojex /opt/codemojex
COPY --from=sources /src/LICENSE /usr/share/doc/codemojex/LICENSE
# Each process's /metrics, /healthz and /readyz on 9100, on loopback unless
# CODEMOJEX_METRICS_HOST says otherwise (they are unauthenticated). No secret here: every
# setting comes from the environment the container is given.
ENV PATH="/opt/codemojex/bin:${PATH}" \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    CODEMOJEX_METRICS_PORT=9100
USER 10001:10001
# The default SQLite file's directory: the user's own.
WORKDIR /home/codemojex
EXPOSE 9100 8080
# dumb-init is PID 1: it passes SIGTERM on to codemojex (which stops at any moment, start-up
# included: the bot confirms what it finished, the worker hands back its leases) and reaps
# whatever is left. `docker run --init` or compose's `init: true` would do the same.
STOPSIGNAL SIGTERM
# The process's own /healthz (its event loop turns; served from its first second): bot,
# worker and ops page. migrate ends before the first check.
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python3", "-c", "import os, urllib.request as u; u.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('CODEMOJEX_METRICS_PORT', '9100'), timeout=4)"]
ENTRYPOINT ["dumb-init", "--", "codemojex"]
CMD ["bot"]

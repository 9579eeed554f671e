# syntax=docker/dockerfile:1
# Codemojex: one image for every process. The command picks it:
#   docker run IMAGE bot | worker | ops | migrate | demo      (codemojex --help lists them)
# compose.yaml and deploy/kubernetes/codemojex.yaml run it; `make image-check` builds it here.
#
# BASE: the official slim Python by default; any base with Python >= 3.11 and `python3 -m
# venv` will do (make image-check builds on a Debian bookworm from mmdebstrap). Both stages
# start from it, so the virtual environment built in the first runs on the second's Python.
ARG BASE=python:3.11-slim-bookworm

FROM ${BASE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_ROOT_USER_ACTION=ignore
WORKDIR /src
# Only what builds the package (.dockerignore), and wheelhouse/ when the context has one.
COPY . .
# Wheels only, at the versions of constraints.txt: nothing is compiled, so no compiler here
# or below. A wheelhouse/ in the build context is looked in first; with PIP_NO_INDEX=1 it is
# the only source (make image-check: the image is built without the package registry).
ARG PIP_NO_INDEX=0
ENV PIP_FIND_LINKS=/src/wheelhouse
RUN python3 -m venv /opt/codemojex \
    && /opt/codemojex/bin/python -m pip wheel --no-deps --wheel-dir /tmp/dist . \
    && /opt/codemojex/bin/python -m pip install --only-binary :all: -c constraints.txt \
        "$(echo /tmp/dist/codemojex-*.whl)[demo]" \
    && /opt/codemojex/bin/python -m pip uninstall --yes setuptools pip \
    && /opt/codemojex/bin/codemojex --help > /dev/null

FROM ${BASE}
ARG VERSION=0.1.0
ARG REVISION=unknown
LABEL org.opencontainers.image.title="codemojex" \
      org.opencontainers.image.description="Emoji code-breaking game for Telegram group chats: bot, worker, ops page, migrations, demo" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="MIT"
# A user of its own, by number too, so that Kubernetes' runAsNonRoot can tell.
RUN useradd --uid 10001 --user-group --no-log-init --create-home --home-dir /home/codemojex \
        --shell /usr/sbin/nologin codemojex
COPY --from=build /opt/codemojex /opt/codemojex
# Each process's /metrics, /healthz and /readyz on 9100, on loopback unless
# CODEMOJEX_METRICS_HOST says otherwise (they are unauthenticated). No secret here: every
# setting comes from the environment the container is given.
ENV PATH="/opt/codemojex/bin:${PATH}" \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    CODEMOJEX_METRICS_PORT=9100
USER 10001:10001
# The demo's and the default SQLite file's directory: the user's own.
WORKDIR /home/codemojex
EXPOSE 9100 8080
# codemojex is PID 1 (the exec form, no shell between): SIGTERM reaches it, and the bot
# confirms what it finished, the worker hands back its leases.
STOPSIGNAL SIGTERM
# The process's own /healthz (its event loop turns): bot and worker. compose.yaml gives the
# ops page a check of its own; migrate and demo end before the first check.
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python3", "-c", "import os, urllib.request as u; u.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('CODEMOJEX_METRICS_PORT', '9100'), timeout=4)"]
ENTRYPOINT ["codemojex"]
CMD ["bot"]

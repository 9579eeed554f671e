"""What the deployments we hand out promise, read from their files so that an edit cannot
quietly break it: one image (the Dockerfile's) for every process, run as a user other than
root, no secret written in any file, Redis keeping an append-only file, the migrations run
once before the processes, one polling bot at a time. `make image-check` builds and runs the
image itself; `make lint` runs hadolint on the Dockerfile."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers.support import ROOT

COMPOSE = ROOT / "compose.yaml"
COMPOSE_ENV = ROOT / "deploy" / "compose.env.example"
DOCKERFILE = ROOT / "Dockerfile"
SECRET_SETTINGS = ("CODEMOJEX_TOKEN", "CODEMOJEX_OPS_TOKEN", "POSTGRES_PASSWORD")
CODEMOJEX = ("migrate", "bot", "worker", "sender", "ops")
# The process roles every example runs (docs/operations.md, "The processes").
ROLES = ("bot", "worker", "sender")


def _compose() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return data


def _redis_aof(args: list[str]) -> tuple[str, str]:
    return args[args.index("--appendonly") + 1], args[args.index("--appendfsync") + 1]


def test_compose_runs_every_process_after_the_migrations_on_a_persistent_redis() -> None:
    services = _compose()["services"]
    assert set(services) == {"postgres", "redis", *CODEMOJEX}
    for name in ("postgres", "redis"):
        assert services[name]["volumes"] and services[name]["healthcheck"]["test"], name
    assert _redis_aof(services["redis"]["command"]) == ("yes", "everysec")
    assert services["migrate"]["command"] == ["migrate"]
    assert services["migrate"]["restart"] == "no"
    assert services["migrate"]["depends_on"]["postgres"] == {"condition": "service_healthy"}
    for name in ("bot", "worker", "sender", "ops"):
        service = services[name]
        assert service["command"] == [name]
        assert service["depends_on"]["migrate"] == {"condition": "service_completed_successfully"}
        assert service["depends_on"]["redis"] == {"condition": "service_healthy"}
    for name in CODEMOJEX:
        assert services[name]["image"] == "codemojex:latest"
        assert services[name]["build"] == "."  # the Dockerfile's image
    # `--scale worker=N`, `--scale sender=N`: nothing that only one container may hold.
    for name in ("worker", "sender"):
        assert not {"container_name", "ports", "hostname"} & set(services[name]), name
    # The ops page reaches only this machine's loopback.
    assert all(p.startswith("127.0.0.1:") for p in services["ops"]["ports"])


def test_compose_writes_no_secret_and_its_env_example_names_every_variable() -> None:
    services = _compose()["services"]
    for name, service in services.items():
        for key, value in service.get("environment", {}).items():
            if key in SECRET_SETTINGS:
                assert re.fullmatch(r"\$\{\w+:\?[^}]+\}", value), (name, key, value)
        for key in ("CODEMOJEX_DATABASE_URL",):
            value = service.get("environment", {}).get(key)
            assert value is None or ":${POSTGRES_PASSWORD:?" in value, (name, value)
    used = set(re.findall(r"\$\{(\w+)", COMPOSE.read_text()))
    example = {
        line.split("=", 1)[0]
        for line in COMPOSE_ENV.read_text().splitlines()
        if line and not line.startswith("#")
    }
    assert used == example
    # Empty in the example: compose refuses to start until they are filled in.
    assert all(line.endswith("=") for line in COMPOSE_ENV.read_text().splitlines() if "=" in line)
    # Codemojex reads a .env of its working directory: none of compose's names is its own.
    assert not any(name.startswith("CODEMOJEX_") for name in example)


KUBERNETES = ROOT / "deploy" / "kubernetes"
OVERLAYS = ("polling", "webhook")
# Redis's own memory beside its data: its buffers, the fork's page tables.
REDIS_OVERHEAD_MIB = 64


def _kubernetes(overlay: str) -> list[dict[str, Any]]:
    """The objects `kubectl apply -k deploy/kubernetes/overlays/<overlay>` applies, rendered
    by the kubectl of the dev extra (its kustomize)."""
    kubectl = Path(sys.executable).with_name("kubectl")
    rendered = subprocess.run(
        [str(kubectl), "kustomize", str(KUBERNETES / "overlays" / overlay)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    return [doc for doc in yaml.safe_load_all(rendered) if doc]


def _workload(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (found,) = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    return found


def _mebibytes(quantity: str) -> float:
    number = float(re.sub(r"[A-Za-z]+$", "", quantity))
    unit = quantity[len(re.sub(r"[A-Za-z]+$", "", quantity)) :].lower()
    return number * {"gi": 1024, "mi": 1, "gb": 1024, "mb": 1}[unit]


def _codemojex_pods(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        d["spec"]["template"]["spec"]
        for d in docs
        if d["kind"] in ("Deployment", "Job")
        and d["spec"]["template"]["metadata"]["labels"]["app"] == "codemojex"
    ]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_kubernetes_runs_the_image_as_a_user_with_measured_requests_and_probes(
    overlay: str,
) -> None:
    docs = _kubernetes(overlay)
    base = yaml.safe_load((KUBERNETES / "base" / "kustomization.yaml").read_text())
    ((image,),) = [[f"{i['newName']}:{i['newTag']}" for i in base["images"]]]
    commands = set()
    for pod in _codemojex_pods(docs):
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["runAsUser"] != 0
        (container,) = pod["containers"]
        assert container["image"] == image
        assert "command" not in container  # the image's entrypoint, `codemojex`
        commands.add(container["args"][0])
        assert container["securityContext"]["allowPrivilegeEscalation"] is False
        requests = container["resources"]["requests"]
        assert set(requests) == {"cpu", "memory"}, container["name"]
        assert "memory" in container["resources"]["limits"]
        if container["args"] != ["migrate"]:
            # Probed from the first second: /healthz while it waits, liveness only after.
            assert container["startupProbe"]["httpGet"]["path"] == "/healthz"
            assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
            assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert commands == set(CODEMOJEX)
    # The image is named once, in the base: every other file names the placeholder alone.
    for path in KUBERNETES.rglob("*.yaml"):
        if path != KUBERNETES / "base" / "kustomization.yaml":
            assert "registry.example.org" not in path.read_text(), path

    tag = image.rsplit(":", 1)[1]
    job = _workload(docs, "Job", f"codemojex-migrate-{tag}")  # each release its own Job
    assert job["spec"]["template"]["spec"]["containers"][0]["args"] == ["migrate"]
    # A drain takes one worker, and one sender, at a time.
    for name in ("codemojex-worker", "codemojex-sender"):
        pdb = _workload(docs, "PodDisruptionBudget", name)
        deployment = _workload(docs, "Deployment", name)
        assert pdb["spec"]["selector"] == deployment["spec"]["selector"]
        assert pdb["spec"]["maxUnavailable"] == 1
    # Prometheus alone reaches every process's /metrics, the sender's too.
    (metrics,) = [d for d in docs if d["metadata"]["name"] == "codemojex-metrics"]
    (selected,) = metrics["spec"]["podSelector"]["matchExpressions"]
    assert {"bot", "worker", "sender", "ops"} <= set(selected["values"])


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_kubernetes_applies_no_secret_and_nothing_in_another_namespace(overlay: str) -> None:
    docs = _kubernetes(overlay)
    assert not [d for d in docs if d["kind"] == "Secret"]
    assert not [d for d in docs if "namespace" in d["metadata"]]
    assert not [d for d in docs if d["kind"] in ("Namespace", "ClusterRole", "ConfigMap")]
    (secret,) = yaml.safe_load_all((KUBERNETES / "secret.example.yaml").read_text())
    assert secret["kind"] == "Secret" and secret["metadata"]["name"] == "codemojex"
    for kustomization in KUBERNETES.rglob("kustomization.yaml"):
        resources = yaml.safe_load(kustomization.read_text())["resources"]
        assert not [r for r in resources if "secret" in r], kustomization


def test_kubernetes_bot_polls_alone_or_serves_a_webhook_behind_a_service_and_ingress() -> None:
    polling = _workload(_kubernetes("polling"), "Deployment", "codemojex-bot")
    # One poller per token: the old bot stops before the new one starts.
    assert polling["spec"]["replicas"] == 1
    assert polling["spec"]["strategy"] == {"type": "Recreate"}

    docs = _kubernetes("webhook")
    bot = _workload(docs, "Deployment", "codemojex-bot")
    assert bot["spec"]["replicas"] >= 2
    assert bot["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    (container,) = bot["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["CODEMOJEX_WEBHOOK_URL"].startswith("https://")
    service = _workload(docs, "Service", "codemojex-bot")
    assert service["spec"]["selector"] == bot["spec"]["selector"]["matchLabels"]
    (port,) = service["spec"]["ports"]
    assert {"name": "webhook", "containerPort": int(env["CODEMOJEX_WEBHOOK_PORT"])} in container[
        "ports"
    ]
    ingress = _workload(docs, "Ingress", "codemojex-bot")
    (rule,) = ingress["spec"]["rules"]
    (path,) = rule["http"]["paths"]
    assert env["CODEMOJEX_WEBHOOK_URL"] == f"https://{rule['host']}{path['path']}"
    assert path["backend"]["service"] == {"name": "codemojex-bot", "port": {"name": port["name"]}}
    assert ingress["spec"]["tls"][0]["hosts"] == [rule["host"]]
    _workload(docs, "PodDisruptionBudget", "codemojex-bot")


def test_kubernetes_redis_keeps_an_append_only_file_and_room_for_its_fork() -> None:
    redis = _workload(_kubernetes("polling"), "StatefulSet", "redis")
    (container,) = redis["spec"]["template"]["spec"]["containers"]
    args = container["args"]
    assert _redis_aof(args) == ("yes", "everysec")
    assert args[args.index("--maxmemory-policy") + 1] == "noeviction"
    # An AOF rewrite forks: under writes the child may need as much again as the data.
    maxmemory = _mebibytes(args[args.index("--maxmemory") + 1])
    limit = _mebibytes(container["resources"]["limits"]["memory"])
    assert 2 * maxmemory + REDIS_OVERHEAD_MIB <= limit, (maxmemory, limit)
    (claim,) = redis["spec"]["volumeClaimTemplates"]
    assert container["volumeMounts"] == [{"name": claim["metadata"]["name"], "mountPath": "/data"}]


def _instructions() -> list[tuple[str, str]]:
    """The Dockerfile's instructions (continuation lines joined, comments dropped)."""
    text = re.sub(r"\\\n\s*", " ", DOCKERFILE.read_text())
    found = []
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            word, _, rest = line.strip().partition(" ")
            found.append((word.upper(), rest.strip()))
    return found


def test_the_dockerfile_builds_one_image_that_runs_as_a_user_with_a_healthcheck() -> None:
    steps = _instructions()
    assert steps[0] == ("ARG", "BASE=python:3.11-slim-bookworm")  # the official slim Python
    froms = [n for n, (word, _) in enumerate(steps) if word == "FROM"]
    assert all(steps[n][1].startswith("${BASE}") for n in froms)
    final = steps[froms[-1] :]
    words = [word for word, _ in final]
    user = dict(final)["USER"]
    assert re.fullmatch(r"\d+:\d+", user) and not user.startswith("0:"), user
    # No package is installed in the final stage: the base's own pip goes, nothing else runs.
    runs = " ".join(rest for word, rest in final if word == "RUN")
    assert not re.search(r"apt-get|pip install|gcc|build-essential", runs), runs
    assert "pip uninstall --yes --root-user-action=ignore pip setuptools wheel" in runs
    copies = [rest for word, rest in final if word == "COPY"]
    assert copies[0] == "--from=build /opt/codemojex /opt/codemojex"
    assert all(c.startswith("--from=sources /src/LICENSE ") for c in copies[1:]), copies
    # Under an init (PID 1 passes SIGTERM on and reaps), in the exec form: no shell between.
    assert dict(final)["ENTRYPOINT"] == '["dumb-init", "--", "codemojex"]'
    assert "/healthz" in dict(final)["HEALTHCHECK"]
    labels = " ".join(rest for word, rest in final if word == "LABEL")
    for label in ("title", "description", "version", "revision", "licenses"):
        assert f"org.opencontainers.image.{label}=" in labels
    assert words.index("USER") < words.index("ENTRYPOINT")
    # No secret: no setting of ours is given a value in the image but the metrics port.
    env = " ".join(rest for word, rest in steps if word in ("ENV", "ARG"))
    assert set(re.findall(r"(CODEMOJEX_\w+)=", env)) == {"CODEMOJEX_METRICS_PORT"}
    assert not re.search(r"TOKEN|SECRET|PASSWORD", env)


def test_the_dockerfile_installs_the_dependencies_before_the_code_with_pinned_tools() -> None:
    steps = _instructions()
    froms = [n for n, (word, _) in enumerate(steps) if word == "FROM"]
    (start,) = [n for n in froms if steps[n][1].endswith("AS build")]
    build = steps[start : froms[froms.index(start) + 1]]
    runs = [n for n, (word, _) in enumerate(build) if word == "RUN"]
    code = build.index(("COPY", "--from=sources /src /src"))
    # The dependencies' layer comes from the files naming them alone, before the code.
    before = [rest for word, rest in build[:code] if word == "COPY"]
    assert {path for rest in before for path in rest.split()[1:-1]} == {
        "/src/pyproject.toml",
        "/src/constraints.txt",
        "/src/deploy/image-build.txt",
        "/src/wheelhouse",
    }
    (install,) = [" ".join(build[n][1].split()) for n in runs if n < code]
    assert "-c constraints.txt -c deploy/image-build.txt -r /tmp/requirements.txt" in install
    # The package itself: without build isolation (the pinned backend) and no dependency.
    (package,) = [" ".join(build[n][1].split()) for n in runs if n > code]
    assert "--no-deps --no-build-isolation" in package
    assert "pip uninstall --yes setuptools wheel pip" in package
    # Every build requirement of pyproject pinned, once.
    pins = dict(
        line.split("==")
        for line in (ROOT / "deploy" / "image-build.txt").read_text().splitlines()
        if line and not line.startswith("#")
    )
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    assert {re.split(r"[<>=!~ ]", r)[0] for r in requires} <= set(pins)
    assert "dumb-init" in pins
    # The demo extra only when a build argument asks for it.
    assert ("ARG", 'EXTRAS=""') in build


def test_the_build_context_leaves_secrets_and_the_checkouts_state_out() -> None:
    patterns = [
        line
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line and not line.startswith("#")
    ]
    assert patterns[0] == "*"  # nothing but what is let in again
    allowed = {p.removeprefix("!").rstrip("/") for p in patterns if p.startswith("!")}
    assert allowed == {
        "pyproject.toml",
        "setup.py",
        "MANIFEST.in",
        "constraints.txt",
        "README.md",
        "LICENSE",
        "codemojex",
        "migrations",
        "wheelhouse",
        "deploy/image-build.txt",
    }


SYSTEMD = ROOT / "deploy" / "systemd"


def _unit_role(unit: Path) -> str:
    """What `codemojex` command a systemd unit runs."""
    (start,) = re.findall(r"^ExecStart=\S*/codemojex (\w+)", unit.read_text(), re.MULTILINE)
    return str(start)


def _readme_enabled() -> list[str]:
    """The units the README's install enables and starts."""
    readme = (ROOT / "README.md").read_text()
    (enable,) = re.findall(r"^systemctl enable --now (.+)$", readme, re.MULTILINE)
    return str(enable).split()


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_example_runs_the_bot_the_worker_and_the_sender(overlay: str) -> None:
    """compose.yaml, both Kubernetes overlays, the systemd units (and the README's install
    that enables them) and the Procfile each run every process role, `codemojex sender`
    included: a deployment copied from any of them posts through a sender of its own, and the
    workers' event loops score (docs/operations.md, "When to run a sender")."""
    compose = {service["command"][0] for service in _compose()["services"].values()
               if service.get("image") == "codemojex:latest"}  # fmt: skip
    assert set(ROLES) <= compose, compose
    kubernetes = {pod["containers"][0]["args"][0] for pod in _codemojex_pods(_kubernetes(overlay))}
    assert set(ROLES) <= kubernetes, kubernetes
    units = {unit.name: _unit_role(unit) for unit in SYSTEMD.glob("*.service")}
    assert set(ROLES) <= set(units.values()), units
    enabled = {units[re.sub(r"@[^.]*$", "@", name) + ".service"] for name in _readme_enabled()}
    assert set(ROLES) <= enabled, enabled
    procfile = {
        line.split(":", 1)[1].split()[1]
        for line in (ROOT / "deploy" / "Procfile").read_text().splitlines()
        if line.strip()
    }
    assert set(ROLES) <= procfile, procfile

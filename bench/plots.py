"""Plots and Markdown tables for docs/benchmarks.md, from the JSON in bench/results/.

Run after the benchmarks: ``.venv/bin/python -m bench.plots`` (reads lanes.json,
fairness.json and pipeline.json when present; writes bench/plots/*.png and prints the
tables as Markdown).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated, Any

import typer

from bench.common import PLOTS_DIR, RESULTS_DIR

app = typer.Typer(add_completion=False, help=__doc__)

COLORS = {
    "fifo": "#7f7f7f",
    "claim": "#1f77b4",
    "wclaim": "#2ca02c",
    "fused": "#9467bd",
    "groupmq": "#d62728",
    "lanes": "#2ca02c",
    "lanes-nocap": "#1f77b4",
}
LABELS = {
    "fifo": "plain FIFO (claim + ack per job)",
    "claim": "lanes claim + ack",
    "wclaim": "lanes wclaim(8) + ack_many",
    "fused": "lanes ack_wclaim(8): ack + next claim in one call",
    "groupmq": "GroupMQ (Node)",
    "lanes": "lanes, ceiling 2",
    "lanes-nocap": "lanes, no ceiling",
}


def _load(name: str) -> dict[str, Any] | None:
    path = RESULTS_DIR / f"{name}.json"
    if not path.exists():
        return None
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def _topo_key(label: str) -> tuple[int, int]:
    if "x" in label:
        procs, consumers = label.split("x")
        return int(procs) * int(consumers), int(procs)
    return int(label), 1


def _num(value: Any, digits: int = 0) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if digits == 0:
        return f"{value:,.0f}"
    return f"{value:,.{digits}f}"


def plot_throughput(data: dict[str, Any]) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out: list[Path] = []
    runs = data["runs"]
    rooms = data["params"]["rooms"]
    topologies = sorted({r["topology"] for r in runs}, key=_topo_key)
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    for mode in ("fifo", "claim", "wclaim", "fused", "groupmq"):
        xs, ys, cpu = [], [], []
        for i, topo in enumerate(topologies):
            match = [r for r in runs if r["mode"] == mode and r["topology"] == topo and r["jobs"]]
            if match:
                xs.append(i)
                ys.append(match[0]["jobs_per_s"])
                cpu.append(match[0]["client_cpu_us_per_job"])
        if xs:
            ax.plot(xs, ys, marker="o", label=LABELS[mode], color=COLORS[mode])
            ax2.plot(xs, cpu, marker="o", label=LABELS[mode], color=COLORS[mode])
    for axis in (ax, ax2):
        axis.set_xticks(range(len(topologies)))
        axis.set_xticklabels([t.replace("x", " proc x ") for t in topologies])
        axis.set_xlabel("consumers (in one process, or processes x consumers)")
        axis.grid(True, alpha=0.3)
        axis.set_ylim(bottom=0)
    ax.set_ylabel("jobs/s (claim + ack)")
    ax.set_title(f"Throughput vs consumers, {rooms:,} rooms")
    ax2.set_ylabel("client CPU µs per job")
    ax2.set_title("Client CPU per job (what bounds a client-bound machine)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = PLOTS_DIR / "throughput_vs_consumers.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    out.append(path)

    sweep = data.get("sweep", [])
    if sweep:
        fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
        for mode in ("claim", "wclaim"):
            for topo in sorted({r["topology"] for r in sweep}, key=_topo_key):
                rows = sorted(
                    (r for r in sweep if r["mode"] == mode and r["topology"] == topo and r["jobs"]),
                    key=lambda r: r["rooms"],
                )
                if not rows:
                    continue
                style = "-" if "x" in topo else "--"
                label = f"{LABELS[mode]}, {topo} consumers"
                rooms_x = [r["rooms"] for r in rows]
                ax.plot(rooms_x, [r["jobs_per_s"] for r in rows], style, marker="o",
                        color=COLORS[mode], label=label)  # fmt: skip
                ax2.plot(rooms_x, [r["server"].get("cpu_us_per_job_raw", math.nan) for r in rows],
                         style, marker="o", color=COLORS[mode], label=label)  # fmt: skip
        for axis, ylabel in ((ax, "jobs/s"), (ax2, "Redis CPU µs per job (used_cpu delta)")):
            axis.set_xscale("log")
            axis.set_ylim(bottom=0)
            axis.set_xlabel("rooms on the ring")
            axis.set_ylabel(ylabel)
            axis.grid(True, alpha=0.3)
        ax.set_title("Throughput vs rooms")
        ax2.set_title("Server cost per job vs rooms (flat = O(1))")
        ax.legend(fontsize=8)
        fig.tight_layout()
        path = PLOTS_DIR / "throughput_vs_rooms.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        out.append(path)
    return out


def plot_latency(data: dict[str, Any]) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for r in data["runs"]:
        lat = r.get("quiet_latency_quantiles_ms") or sorted(r.get("quiet_latencies_ms", []))
        if not lat:
            continue
        ys = [(i + 1) / len(lat) for i in range(len(lat))]
        ax.plot(
            lat,
            ys,
            "-" if r["flood"] else ":",
            color=COLORS.get(r["queue"], "black"),
            label=f"{LABELS.get(r['queue'], r['queue'])}, {'flood' if r['flood'] else 'no flood'}",
        )
    ax.set_xscale("log")
    ax.set_xlabel("quiet room guess: enqueue to scored (ms, log)")
    ax.set_ylabel("fraction of guesses")
    ax.set_title("Quiet rooms' latency, with and without a flooding room")
    ax.grid(True, alpha=0.3, which="both")
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    path = PLOTS_DIR / "latency_distribution.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path]


def markdown_lanes(data: dict[str, Any]) -> str:
    lines = []
    fifo = {r["topology"]: r["jobs_per_s"] for r in data["runs"] if r["mode"] == "fifo"}
    head = (
        "| queue | consumers | rooms | jobs/s | x FIFO | jobs/claim | Redis script µs/job "
        "(raw) | Redis CPU µs/job | client CPU µs/job | load |"
    )
    sep = "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"

    def row(r: dict[str, Any]) -> str:
        base = fifo.get(r["topology"])
        ratio = r["jobs_per_s"] / base if base else math.nan
        return (
            f"| {r['mode']} | {r['topology']} | {_num(r['rooms']) if r['rooms'] else '-'} "
            f"| {_num(r['jobs_per_s'])} | {_num(ratio, 2)} | {_num(r['jobs_per_claim'], 1)} "
            f"| {_num(r['server'].get('script_us_per_job'), 1)} "
            f"({_num(r['server'].get('script_us_per_job_raw'), 1)}) "
            f"| {_num(r['server'].get('cpu_us_per_job'), 1)} | {_num(r['client_cpu_us_per_job'])} "
            f"| {_num(r.get('load1'), 1)} |"
        )

    lines += ["#### Throughput at equal concurrency", "", head, sep]
    lines += [row(r) for r in data["runs"]]
    if data.get("sweep"):
        lines += ["", "#### Throughput vs number of rooms", "", head, sep]
        lines += [row(r) for r in data["sweep"]]
    if data.get("memory"):
        lines += [
            "",
            "#### Redis memory per pending guess",
            "",
            "| queue | guesses | keys | payload B | B/guess (MEMORY USAGE) "
            "| of which job records | used_memory Δ B/guess |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for m in data["memory"]:
            lines.append(
                f"| {m['queue']} | {_num(m['guesses'])} | {_num(m['keys'])} "
                f"| {m['payload_bytes']} | {_num(m['bytes_per_guess'])} "
                f"| {_num(m['job_record_bytes_per_guess'])} "
                f"| {_num(m['used_memory_delta_per_guess'])} |"
            )
    if data.get("targets"):
        lines += ["", "#### Targets", "", "| target | value | met |", "|---|---:|---|"]
        for c in data["targets"]:
            lines.append(
                f"| {c['target']} | {_num(c['value'], 2)} | {'yes' if c['met'] else '**no**'} |"
            )
    return "\n".join(lines)


def markdown_fairness(data: dict[str, Any]) -> str:
    base = {r["queue"]: r for r in data["runs"] if not r["flood"]}
    lines = [
        "| queue | run | quiet guesses | p50 ms | p99 ms | max ms | p99 / no-flood p99 "
        "| flood share | Jain | completions/s | window s |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in data["runs"]:
        ratio = r["p99_ms"] / base[r["queue"]]["p99_ms"] if r["flood"] else math.nan
        lines.append(
            f"| {r['queue']} | {'flood' if r['flood'] else 'no flood'} "
            f"| {_num(r['quiet_guesses'])} | {_num(r['p50_ms'], 1)} | {_num(r['p99_ms'], 1)} "
            f"| {_num(r['max_ms'], 1)} | {_num(ratio, 2)} "
            f"| {_num(r['flood_share'], 3) if r['flood'] else '-'} | {_num(r['jain'], 3)} "
            f"| {_num(r['completions_per_s'])} | {_num(r['window_s'], 1)} |"
        )
    return "\n".join(lines)


@app.command()
def main(
    lanes: Annotated[str, typer.Option(help="results name of bench.lanes")] = "lanes",
    fairness: Annotated[str, typer.Option(help="results name of bench.fairness")] = "fairness",
) -> None:
    PLOTS_DIR.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    lanes_data = _load(lanes)
    if lanes_data:
        written += plot_throughput(lanes_data)
        print(markdown_lanes(lanes_data))
        print()
    fair_data = _load(fairness)
    if fair_data:
        written += plot_latency(fair_data)
        print(markdown_fairness(fair_data))
        print()
    for path in written:
        print(f"wrote {path.relative_to(PLOTS_DIR.parent.parent)}")


if __name__ == "__main__":
    app()

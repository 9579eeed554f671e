// The ops page's live parts: the tables refresh every 3 s, the charts every 5 s, without a
// reload. Sorting, paging and actions are plain links and forms (they work without this).
"use strict";

const live = document.getElementById("live");

async function refreshLive() {
  // Do not pull the form from under an operator typing a ceiling.
  if (live.contains(document.activeElement) && document.activeElement.tagName === "INPUT") return;
  const res = await fetch(live.dataset.src, { credentials: "same-origin" });
  if (res.status === 401) { location.href = "/login"; return; }
  if (res.ok) live.innerHTML = await res.text();
}

const SERIES = {
  queue: [["pending", "#2864c7"], ["active", "#2a9d5c"], ["delayed", "#c78a28"]],
  scored: [["scored_per_s", "#2a9d5c"]],
  wait: [["wait_p50", "#2864c7"], ["wait_p90", "#c78a28"], ["wait_p99", "#c73a28"]],
  outbox: [["outbox", "#7a4bc7"]],
  retry: [["refused_chat", "#c78a28"], ["refused_group", "#2864c7"], ["refused_bot", "#c73a28"]],
  pace: [["pace_rate", "#2a9d5c"]],
};
const charts = {};

function chartFor(el, name, data) {
  const opts = {
    width: el.clientWidth || 320, height: 150, legend: { live: false },
    scales: { x: { time: true } },
    series: [{}, ...SERIES[name].map(([key, stroke]) => ({ label: key, stroke, width: 1.5 }))],
    axes: [{}, { size: 50 }],
  };
  return new uPlot(opts, data, el);
}

async function refreshCharts() {
  const res = await fetch("/history.json", { credentials: "same-origin" });
  if (!res.ok) return;
  const h = await res.json();
  for (const el of document.querySelectorAll("[data-chart]")) {
    const name = el.dataset.chart;
    const data = [h.t, ...SERIES[name].map(([key]) => h[key])];
    if (charts[name]) charts[name].setData(data);
    else charts[name] = chartFor(el, name, data);
  }
}

setInterval(() => refreshLive().catch(() => {}), 3000);
setInterval(() => refreshCharts().catch(() => {}), 5000);
refreshCharts().catch(() => {});

// The GroupMQ peer row of bench/lanes.py: the same jobs, groups and concurrency on the same
// Redis, driven by bench/lanes.py through subprocess. Two modes:
//
//   node run.mjs load --ns NS --jobs N --groups G --payload FILE
//       enqueue N jobs round-robin over G groups, print {"loaded": N, "ms": ...}
//   node run.mjs work --ns NS --concurrency C [--timeout-ms T]
//       start the Worker only when a line arrives on stdin (so process start-up is not
//       timed), run until the queue is empty, print {"completed", "first_ms", "last_ms", ...}
//
// Timestamps are epoch ms, comparable with the Python side's time.time().
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import Redis from "ioredis";
import { Queue, Worker } from "groupmq";

function parseArgs(argv) {
  const out = { _: [] };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i].startsWith("--")) {
      out[argv[i].slice(2)] = argv[i + 1];
      i++;
    } else {
      out._.push(argv[i]);
    }
  }
  return out;
}

const args = parseArgs(process.argv.slice(2));
const mode = args._[0];
const url = args.redis ?? "redis://127.0.0.1:6379/0";
const ns = args.ns;
if (!ns) {
  console.error("--ns is required");
  process.exit(2);
}

async function load() {
  const jobs = Number(args.jobs);
  const groups = Number(args.groups);
  // GroupMQ stores JSON data: the guess payload (text) goes in as one string field.
  const data = { p: readFileSync(args.payload, "utf8") };
  const redis = new Redis(url, { maxRetriesPerRequest: null });
  // autoBatch sends adds through the enqueue-batch script: only the preload uses it.
  const queue = new Queue({ redis, namespace: ns, autoBatch: { size: 200, maxWaitMs: 2 } });
  const t0 = Date.now();
  const chunk = 2000;
  for (let start = 0; start < jobs; start += chunk) {
    const adds = [];
    for (let i = start; i < Math.min(jobs, start + chunk); i++) {
      adds.push(queue.add({ groupId: `g${i % groups}`, data, orderMs: t0 + i }));
    }
    await Promise.all(adds);
  }
  await queue.close();
  return { loaded: jobs, ms: Date.now() - t0 };
}

async function work() {
  const concurrency = Number(args.concurrency ?? 1);
  const timeoutMs = Number(args["timeout-ms"] ?? 120000);
  const redis = new Redis(url, { maxRetriesPerRequest: null });
  const queue = new Queue({ redis, namespace: ns, jobTimeoutMs: 30000 });
  await redis.ping();
  process.stdout.write("ready\n");
  const rl = createInterface({ input: process.stdin });
  await new Promise((resolve) => rl.once("line", resolve));
  rl.close();
  const startMs = Date.now();
  const cpu0 = process.cpuUsage();
  let completed = 0;
  let firstMs = 0;
  let lastMs = 0;
  const worker = new Worker({
    queue,
    concurrency,
    handler: async () => null,
  });
  worker.on("completed", () => {
    const now = Date.now();
    if (completed === 0) firstMs = now;
    completed++;
    lastMs = now;
  });
  worker.on("error", (err) => console.error("worker error:", err?.message ?? err));
  const empty = await queue.waitForEmpty(timeoutMs);
  const cpu = process.cpuUsage(cpu0);
  await worker.close(5000);
  await queue.close();
  return { completed, start_ms: startMs, first_ms: firstMs, last_ms: lastMs, empty, concurrency, cpu_us: cpu.user + cpu.system };
}

const result = mode === "load" ? await load() : mode === "work" ? await work() : null;
if (result === null) {
  console.error(`unknown mode ${mode}`);
  process.exit(2);
}
process.stdout.write(JSON.stringify(result) + "\n");
process.exit(0);

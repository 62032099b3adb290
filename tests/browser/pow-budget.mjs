// The proof of work's cost on a slow phone (BENCHMARKS.md, "The proof of work on a phone"):
// Debian's Chromium, its CPU slowed down `FLOODGATE_CPU_SLOWDOWN` times (4 by default, as
// Chromium's own "mid-tier mobile" preset), solves puzzles with the page's own solver
// (static/floodgate-client.js) at each difficulty, and prints the median and slowest time of
// each as JSON: `node tests/browser/pow-budget.mjs` (after `deploy/stack.sh tools`). The
// gateways' FLOODGATE_POW_CEILING default is chosen from it.
import http from "node:http";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

import { launch } from "./chromium.mjs";

const client = readFileSync(fileURLToPath(new URL("../../static/floodgate-client.js", import.meta.url)));
const page = `<!doctype html><script type="module">
  import { solvePuzzle } from "/floodgate-client.js";
  window.solveAt = async (difficulty, n) => {
    const started = performance.now();
    await solvePuzzle({ kind: "pow", puzzle: "p1~bench~" + n + "~" + difficulty, difficulty });
    return performance.now() - started;
  };
  window.ready = true;
</script>`;
const server = http.createServer((request, response) => {
  if (request.url === "/floodgate-client.js") {
    response.writeHead(200, { "content-type": "text/javascript" }).end(client);
  } else {
    response.writeHead(200, { "content-type": "text/html" }).end(page);
  }
});
await new Promise((ready) => server.listen(0, "127.0.0.1", ready));
const slowdown = Number(process.env.FLOODGATE_CPU_SLOWDOWN ?? 4);
const runs = Number(process.env.FLOODGATE_POW_RUNS ?? 9);
const [from, to] = (process.env.FLOODGATE_POW_BITS ?? "12-19").split("-").map(Number);

const browser = await launch();
try {
  const tab = await browser.newPage();
  await tab.goto(`http://127.0.0.1:${server.address().port}/`);
  await tab.waitForFunction(() => window.ready === true);
  const cdp = await tab.context().newCDPSession(tab);
  await cdp.send("Emulation.setCPUThrottlingRate", { rate: slowdown });
  const results = [];
  for (let bits = from; bits <= to; bits++) {
    const times = [];
    for (let n = 0; n < runs; n++) times.push(await tab.evaluate(([d, i]) => window.solveAt(d, i), [bits, n]));
    times.sort((a, b) => a - b);
    results.push({ bits, median_ms: Math.round(times[Math.floor(runs / 2)]), slowest_ms: Math.round(times[runs - 1]) });
  }
  console.log(JSON.stringify({ cpu_slowdown: slowdown, runs, results }));
} finally {
  await browser.close();
  server.close();
}

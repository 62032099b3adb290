// The page reconnects by itself and keeps its place when its gateway goes away. Joins the queue,
// prints {"before": {ticket, position}} as a line, then waits for a line on stdin (the test has
// stopped the gateway the page was on), waits for the page to be back on a new socket, and prints
// {"after": {...}, "sockets"}. Saves reconnect-before.png and reconnect-after.png.
//
//   node reconnect.mjs <page url> <artifacts folder>
import { createInterface } from "node:readline";
import { launch, PHONE, placed } from "./chromium.mjs";

const [url, artifacts] = process.argv.slice(2);
const input = createInterface({ input: process.stdin });
const lines = input[Symbol.asyncIterator]();
const browser = await launch();
try {
  const page = await browser.newPage(PHONE);
  // Each socket the page opens, with the last position heard on it.
  const sockets = [];
  page.on("websocket", (ws) => {
    const seen = { position: null };
    sockets.push(seen);
    ws.on("framereceived", (frame) => {
      try {
        const msg = JSON.parse(frame.payload);
        if (msg.type === "position") seen.position = msg.position;
      } catch { /* not ours */ }
    });
  });
  await page.goto(url);
  await page.getByRole("button", { name: "Join the queue" }).click();
  const before = await placed(page);
  await page.screenshot({ path: `${artifacts}/reconnect-before.png`, fullPage: true });
  console.log(JSON.stringify({ before }));
  await lines.next();
  input.close();
  // A second socket, and a position heard on it.
  const deadline = Date.now() + 20_000;
  while (!(sockets.length >= 2 && sockets.at(-1).position !== null) && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 50));
  }
  const after = { ...(await placed(page)), heard: sockets.at(-1).position };
  await page.screenshot({ path: `${artifacts}/reconnect-after.png`, fullPage: true });
  console.log(JSON.stringify({ after, sockets: sockets.length }));
} finally {
  await browser.close();
}

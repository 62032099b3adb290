// The ops console turns the admission rate: sign in with the ops token, watch the sale, set a
// new rate, and wait until the console's admitted figure reaches `expected`. Then it raises the
// bot check at the door (a 20-bit proof of work), as during an attack, and reads the console's
// list of operator actions. Prints the figures before and after and that list as JSON; saves console-before.png and console-after.png.
//
//   node console.mjs <console url> <ops token> <new rate> <expected admitted> <artifacts folder>
import { launch } from "./chromium.mjs";

const [url, token, rate, expected, artifacts] = process.argv.slice(2);
const browser = await launch();
try {
  // Operators use a laptop or a desk screen.
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  const figures = async () => ({
    waiting: await page.textContent("#waiting"),
    admitted: await page.textContent("#admitted"),
    state: await page.textContent("#state"),
    rate: await page.inputValue("#rate"),
  });
  await page.goto(url);
  await page.fill("#token", token);
  await page.click("#watch");
  await page.waitForFunction(() => /^\d/.test(document.querySelector("#waiting")?.textContent ?? ""));
  // A second sample (the console polls every second), so the charts have a line.
  const first = await page.textContent("#message");
  await page.waitForFunction((m) => document.querySelector("#message")?.textContent !== m, first);
  const before = await figures();
  await page.screenshot({ path: `${artifacts}/console-before.png`, fullPage: true });

  await page.fill("#rate", rate);
  await page.click("#set-rate");
  await page.waitForFunction(
    (n) => Number((document.querySelector("#admitted")?.textContent ?? "").replace(/\D/g, "")) >= n,
    Number(expected),
    { timeout: 30_000 },
  );
  const after = await figures();
  const message = await page.textContent("#message");

  await page.selectOption("#challenge", "pow");
  await page.fill("#difficulty", "20");
  await page.click("#set-door");
  await page.waitForFunction(() => document.querySelector("#message")?.textContent === "done");
  // The console's audit table lists both changes, newest first, once it has refreshed.
  await page.waitForFunction(() => document.querySelectorAll("#audit tr").length >= 2);
  const audit = await page.$$eval("#audit tr", (rows) =>
    rows.map((row) => [...row.querySelectorAll("td")].map((cell) => cell.textContent)),
  );
  await page.screenshot({ path: `${artifacts}/console-after.png`, fullPage: true });
  console.log(JSON.stringify({ before, after, message, audit }));
} finally {
  await browser.close();
}

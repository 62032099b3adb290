// One user's journey on a phone-sized screen: the list of sales, the sale's train list, the
// queue, admission, a class, the hold with its countdown, payment on the sandbox provider's
// checkout page (a new tab), and the confirmation. With "expire" the user never pays, and the
// script waits for the page to show the hold's expiry instead; with "refused" the site names
// another payment provider than the one answering, and the script waits for the page to refuse
// the checkout. Saves a screenshot of each step into the artifacts folder (journey-*.png,
// expiry-*.png or refused-*.png); prints what it saw as JSON.
//
//   node journey.mjs <home page url> [pay|expire|refused] <artifacts folder>
import { launch, PHONE } from "./chromium.mjs";

const args = process.argv.slice(2);
const artifacts = args.pop();
const [url, mode = "pay"] = args;
const prefix = { expire: "expiry", refused: "refused" }[mode] ?? "journey";
const browser = await launch();
let page;
const problems = [];
const shot = (p, name) => p.screenshot({ path: `${artifacts}/${prefix}-${name}.png`, fullPage: true });
// Waits for `predicate` on the page; on failure saves a screenshot and says what the page showed.
async function until(predicate, arg, timeout) {
  try {
    await page.waitForFunction(predicate, arg, { timeout });
  } catch (e) {
    await shot(page, "failed");
    throw new Error(`${e.message}\nstatus: ${await page.textContent("#status")}\npage errors: ${problems.join(" | ")}`);
  }
}
try {
  const context = await browser.newContext(PHONE);
  page = await context.newPage();
  // The page's own errors (a refused request, a script error) explain a failed step.
  page.on("console", (m) => { if (m.type() === "error") problems.push(m.text()); });
  page.on("pageerror", (e) => problems.push(String(e)));
  await page.goto(url);

  // The list of sales: pick the (only) one.
  await page.locator("#sales a").first().waitFor({ timeout: 10_000 });
  const sales = await page.locator("#sales a").allTextContents();
  await shot(page, "0-sales");
  await page.locator("#sales a").first().click();

  // The train list, from the static catalog, with live seat counts.
  await until(() => document.querySelectorAll("#trains .train").length > 0
    && [...document.querySelectorAll(".avail")].every((a) => a.textContent.trim() !== ""), null, 10_000);
  const trains = await page.locator("#trains .train h3").allTextContents();
  await shot(page, "1-trains");

  // Join, wait, get admitted.
  await page.getByRole("button", { name: "Join the queue" }).click();
  await until(() => /^\d+$/.test(document.querySelector("#ticket")?.textContent ?? ""), null, 10_000);
  const ticket = Number(await page.textContent("#ticket"));
  await shot(page, "2-waiting");
  const book = page.locator("#trains button.book:not([disabled])").first();
  await book.waitFor({ timeout: 30_000 });
  // The alert's words land a moment after the page changes (announce() waits a tick so the same
  // words twice are still read): wait for them rather than read too soon.
  await until(() => (document.querySelector("#alert")?.textContent ?? "") !== "", null, 5_000);
  const announced = await page.textContent("#alert");
  await shot(page, "3-admitted");

  // Hold a seat: the countdown runs.
  await book.click();
  const pay = page.getByRole("button", { name: /^Pay/ });
  await pay.waitFor({ timeout: 15_000 });
  await until(() => /^\d+:\d\d$/.test(document.querySelector("#hold-left")?.textContent ?? ""), null, 5_000);
  const countdown = await page.textContent("#hold-left");
  const summary = await page.textContent("#hold-summary");
  await shot(page, "4-held");

  if (mode === "expire") {
    await until(() => /expired/i.test(document.querySelector("#status")?.textContent ?? ""), null, 60_000);
    await shot(page, "5-expired");
  } else if (mode === "refused") {
    await pay.click();
    await until(() => /not opened/i.test(document.querySelector("#status")?.textContent ?? ""), null, 15_000);
    await shot(page, "5-refused");
  } else {
    const [checkout] = await Promise.all([context.waitForEvent("page"), pay.click()]);
    await checkout.waitForLoadState();
    await shot(checkout, "5-checkout");
    await checkout.click("#pay");
    await checkout.waitForFunction(() => document.querySelector("#out")?.textContent.startsWith("Done"));
    // Back on the booking page: confirmed once the provider's webhook has landed.
    await page.bringToFront();
    await until(() => /confirmed/i.test(document.querySelector("#status")?.textContent ?? ""), null, 30_000);
    await shot(page, "6-confirmed");
  }
  console.log(JSON.stringify({
    sales,
    trains,
    ticket,
    announced,
    countdown,
    summary,
    result: (await page.textContent("#status")).trim(),
    details: mode === "refused" ? "" : (await page.textContent(mode === "expire" ? "#panel" : "#done-summary")).trim(),
    pages: page.context().pages().length,
  }));
} finally {
  await browser.close();
}

// A signed-in buyer's journey on a sale for signed-in buyers with a proof of work at the door:
// the page asks them to sign in, sends them to the operator's sign-in (the sandbox's stand-in)
// and back, solves the bot check and joins. A second tab of the same browser (the same buyer)
// joins too and shows the same ticket and place. The script prints {"first", "second"} as a line
// and waits for a line on stdin (the test lets admission go on), then books and pays in the first
// tab and prints {"result", "details", "signedIn"}. Saves <name>-*.png (name: signin unless given).
// The same journey runs against the sandbox's stand-in and against a certified OpenID provider
// (oidc-provider.mjs): both sign-in pages ask for a name (#name) and have one submit button.
//
//   node signin.mjs <sale page url> <artifacts folder> [screenshot name]
import { createInterface } from "node:readline";
import { launch, PHONE, placed } from "./chromium.mjs";

const [url, artifacts, name = "signin"] = process.argv.slice(2);
const input = createInterface({ input: process.stdin });
const lines = input[Symbol.asyncIterator]();
const browser = await launch();
const shot = (p, step) => p.screenshot({ path: `${artifacts}/${name}-${step}.png`, fullPage: true });
try {
  const context = await browser.newContext(PHONE);
  const page = await context.newPage();
  await page.goto(url);
  const join = page.locator("#join");
  await page.waitForFunction(() => document.querySelector("#join")?.textContent === "Sign in to join");
  await shot(page, "0-asked");
  await join.click();

  // The operator's sign-in page, then back to the page, which redeems the code for the token.
  await page.waitForSelector("#name");
  await shot(page, "1-signin");
  await page.fill("#name", "asha");
  await page.click("button[type=submit]");
  await page.waitForFunction(() => /Signed in as asha/.test(document.querySelector("#signed-in")?.textContent ?? ""));
  const signedIn = await page.textContent("#signed-in");
  await page.getByRole("button", { name: "Join the queue" }).click();
  const first = await placed(page);
  await shot(page, "2-waiting");

  // The same buyer in a second tab: the same place, not a new one.
  const second = await context.newPage();
  await second.goto(url);
  await second.getByRole("button", { name: "Join the queue" }).click();
  const again = await placed(second);
  await shot(second, "3-second-tab");
  console.log(JSON.stringify({ first, second: again }));
  await lines.next();
  input.close();

  // Admitted: book and pay in the first tab.
  const book = page.locator("#trains button.book:not([disabled])").first();
  await book.waitFor({ timeout: 30_000 });
  await book.click();
  const pay = page.getByRole("button", { name: /^Pay/ });
  await pay.waitFor({ timeout: 15_000 });
  await shot(page, "4-held");
  const [checkout] = await Promise.all([context.waitForEvent("page"), pay.click()]);
  await checkout.waitForLoadState();
  await checkout.click("#pay");
  await checkout.waitForFunction(() => document.querySelector("#out")?.textContent.startsWith("Done"));
  await page.bringToFront();
  await page.waitForFunction(() => /confirmed/i.test(document.querySelector("#status")?.textContent ?? ""), null, { timeout: 30_000 });
  await shot(page, "5-confirmed");
  console.log(JSON.stringify({
    signedIn,
    result: (await page.textContent("#status")).trim(),
    details: (await page.textContent("#done-summary")).trim(),
  }));
} finally {
  await browser.close();
}

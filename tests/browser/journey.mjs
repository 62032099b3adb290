// One user's journey: wait in the room, get admitted, pick a class, reserve, pay on the sandbox
// provider's checkout page (a new tab), and see the confirmation. Screenshots of each step go to
// the artifacts folder; prints {"ticket", "result"} as JSON.
//
//   node journey.mjs <page url> <artifacts folder>
import { launch, PHONE } from "./chromium.mjs";

const [url, artifacts] = process.argv.slice(2);
const browser = await launch();
try {
  const context = await browser.newContext(PHONE);
  const page = await context.newPage();
  // The page's own errors (a refused request, a script error) explain a failed step.
  const problems = [];
  page.on("console", (m) => { if (m.type() === "error") problems.push(m.text()); });
  page.on("pageerror", (e) => problems.push(String(e)));
  const shot = (name) => page.screenshot({ path: `${artifacts}/journey-${name}.png`, fullPage: true });
  await page.goto(url);
  await page.waitForFunction(() => /^\d+$/.test(document.querySelector("#ticket")?.textContent ?? ""));
  const ticket = Number(await page.textContent("#ticket"));
  await shot("1-waiting");

  // Admitted: the classes appear.
  const firstClass = page.locator("#pools button").first();
  await firstClass.waitFor({ timeout: 30_000 });
  await shot("2-admitted");
  await firstClass.click();
  const pay = page.getByRole("button", { name: "Pay now" });
  await pay.waitFor({ timeout: 15_000 });
  await shot("3-held");

  // Pay in the provider's tab.
  const [checkout] = await Promise.all([context.waitForEvent("page"), pay.click()]);
  await checkout.waitForLoadState();
  await checkout.screenshot({ path: `${artifacts}/journey-4-checkout.png`, fullPage: true });
  await checkout.click("#pay");
  await checkout.waitForFunction(() => document.querySelector("#out")?.textContent.startsWith("Done"));

  // Back on the booking page: confirmed once the webhook has landed.
  await page.bringToFront();
  await page.waitForFunction(
    () => /confirmed/i.test(document.querySelector("#status")?.textContent ?? ""),
    null,
    { timeout: 30_000 },
  ).catch(async (e) => {
    await shot("failed");
    throw new Error(`${e.message}\nstatus: ${await page.textContent("#status")}\npage errors: ${problems.join(" | ")}`);
  });
  await shot("5-confirmed");
  console.log(JSON.stringify({ ticket, result: (await page.textContent("#status")).trim() }));
} finally {
  await browser.close();
}

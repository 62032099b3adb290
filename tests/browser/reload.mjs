// A reload during the wait keeps the place: open the sale's page on a phone-sized screen, join
// the queue, note the ticket and position, reload, and note them again (the page rejoins by
// itself). Prints the values as JSON; saves a screenshot of each state into the artifacts folder.
//
//   node reload.mjs <page url> <artifacts folder>
import { launch, PHONE, placed } from "./chromium.mjs";

const [url, artifacts] = process.argv.slice(2);
const browser = await launch();
try {
  const page = await browser.newPage(PHONE);
  await page.goto(url);
  await page.getByRole("button", { name: "Join the queue" }).click();
  const before = await placed(page);
  const eta = await page.textContent("#eta");
  // What a screen reader heard (the polite live region).
  await page.waitForFunction(() => /place in line/.test(document.querySelector("#announce")?.textContent ?? ""));
  const announced = await page.textContent("#announce");
  await page.screenshot({ path: `${artifacts}/reload-before.png`, fullPage: true });
  await page.reload();
  const after = await placed(page);
  await page.screenshot({ path: `${artifacts}/reload-after.png`, fullPage: true });
  console.log(JSON.stringify({ before, after, eta, announced }));
} finally {
  await browser.close();
}

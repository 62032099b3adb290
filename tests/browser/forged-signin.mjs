// Login CSRF: a stranger sends a buyer a link that carries the stranger's own sign-in (an ID
// token in the fragment, or an authorization code and state the stranger got for themselves).
// Opened in a fresh browser, the page must not sign the buyer in as the stranger. For each URL
// the script opens it, waits until the page shows who is signed in (or offers to sign in), and
// reports what it found; it prints them as one JSON array. Saves forged-<n>.png.
//
//   node forged-signin.mjs <url>... <artifacts folder>
import { launch, PHONE } from "./chromium.mjs";

const urls = process.argv.slice(2);
const artifacts = urls.pop();
const browser = await launch();
const found = [];
try {
  for (const [n, url] of urls.entries()) {
    const context = await browser.newContext(PHONE);
    const page = await context.newPage();
    await page.goto(url);
    // Either the sign-in button or the signed-in name shows once the page has settled.
    await page.waitForSelector("#signin:not([hidden]), #signed-in:not([hidden])", { timeout: 20_000 });
    await page.screenshot({ path: `${artifacts}/forged-${n}.png`, fullPage: true });
    found.push(await page.evaluate(() => ({
      stored: localStorage.getItem("floodgate:identity"),
      shown: document.querySelector("#signed-in").hidden ? null : document.querySelector("#signed-in").textContent,
      address: location.href,
    })));
    await context.close();
  }
  console.log(JSON.stringify(found));
} finally {
  await browser.close();
}

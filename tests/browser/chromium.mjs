// Debian's Chromium, headless, for the browser tests (FLOODGATE_CHROMIUM overrides the path),
// and what the scripts share.
import { chromium } from "playwright-core";

export function launch() {
  return chromium.launch({
    executablePath: process.env.FLOODGATE_CHROMIUM || "/usr/bin/chromium",
    args: ["--no-sandbox", "--disable-dev-shm-usage"],
  });
}

// A phone-sized page, as most buyers use.
export const PHONE = { viewport: { width: 390, height: 844 }, deviceScaleFactor: 2 };

// Waits until the page shows a ticket and a place in line; both, as numbers.
export async function placed(page) {
  await page.waitForFunction(
    () => /^\d+$/.test(document.querySelector("#ticket")?.textContent ?? "")
      && /^\d+$/.test(document.querySelector("#position")?.textContent ?? ""),
    null,
    { timeout: 20_000 },
  );
  return {
    ticket: Number(await page.textContent("#ticket")),
    position: Number(await page.textContent("#position")),
  };
}

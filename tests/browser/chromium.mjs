// Debian's Chromium, headless, for the browser tests (FLOODGATE_CHROMIUM overrides the path).
import { chromium } from "playwright-core";

export function launch() {
  return chromium.launch({
    executablePath: process.env.FLOODGATE_CHROMIUM || "/usr/bin/chromium",
    args: ["--no-sandbox", "--disable-dev-shm-usage"],
  });
}

// A phone-sized page, as most buyers use.
export const PHONE = { viewport: { width: 390, height: 844 }, deviceScaleFactor: 2 };

// Drive the chat page in Debian's headless Chromium with playwright-core
// (never a browser download): type a question, wait for the streamed answer,
// then one that trips the guardrail; print what the page shows as JSON.
// Usage: node page_browser.mjs <base-url> <screenshot.png> <user-data-dir>
import { chromium } from "playwright-core";

const [base, screenshot, userDataDir] = process.argv.slice(2);
const args = [
  "--disable-background-networking",
  "--disable-component-update",
  "--no-first-run",
  "--disable-sync",
  "--disable-gpu",
];
if (process.getuid && process.getuid() === 0) args.push("--no-sandbox");

const context = await chromium.launchPersistentContext(userDataDir, {
  executablePath: process.env.PROCESSION_CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args,
  viewport: { width: 900, height: 900 },
});
try {
  const page = context.pages()[0] || (await context.newPage());
  const consoleErrors = [];
  page.on("pageerror", (error) => consoleErrors.push(String(error)));
  await page.goto(base + "/");
  await page.waitForSelector("#agent option", { state: "attached" });

  await page.fill("#input", "Where is my order A-1042?");
  await page.press("#input", "Enter");
  await page.waitForSelector(".assistant.done", { timeout: 20000 });
  const first = await page.$eval(".assistant.done", (box) => ({
    text: box.querySelector(".text:last-of-type")?.textContent ?? "",
    rejected: [...box.querySelectorAll(".rejected")].map((n) => n.textContent),
    retries: [...box.querySelectorAll(".retry")].map((n) => n.textContent),
    tools: [...box.querySelectorAll(".tool")].map((n) => n.textContent),
    notes: [...box.querySelectorAll(".note")].map((n) => n.textContent),
  }));

  await page.fill("#input", "How do I reset the router?");
  await page.press("#input", "Enter");
  await page.waitForSelector("#tripwire", { timeout: 20000 });
  const banner = await page.textContent("#tripwire");

  // A refund waits for a person: the page shows Approve / Decline.
  await page.fill("#input", "Please refund order A-1042");
  await page.press("#input", "Enter");
  const approve = await page.waitForSelector(".assistant button.approve", { timeout: 20000 });
  const waiting = await page.$eval(".assistant:last-of-type", (box) => box.textContent);
  await approve.click();
  await page.waitForFunction(
    () => document.querySelector(".assistant:last-of-type")?.classList.contains("done")
      && document.querySelector(".assistant:last-of-type .ask")?.textContent === "approved"
      && document.querySelector(".assistant:last-of-type .text:last-of-type")?.textContent,
    null,
    { timeout: 20000 },
  );
  const refund = await page.$eval(".assistant:last-of-type", (box) => ({
    text: box.querySelector(".text:last-of-type")?.textContent ?? "",
    tools: [...box.querySelectorAll(".tool")].map((n) => n.textContent),
  }));
  await page.screenshot({ path: screenshot, fullPage: true });
  console.log(JSON.stringify({ first, banner, waiting, refund, consoleErrors }));
} finally {
  await context.close();
}

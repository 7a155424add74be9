// Opens the web demo in headless Chromium (Debian's /usr/bin/chromium, driven by playwright-core;
// no browser is downloaded), waits until the page has run its frames and written them into
// <output id="result">, saves a screenshot, and prints what the page showed as one JSON line.
//
// usage: node .ci/web-demo-test.mjs URL SCREENSHOT MODULES
// (MODULES: the node_modules directory playwright-core was installed into)
import { createRequire } from "node:module";
import { resolve } from "node:path";

const [, , url, screenshot, modules] = process.argv;
const require = createRequire(resolve(modules, "index.js"));
const { chromium } = require("playwright-core");

const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
    headless: true,
    chromiumSandbox: false,
    args: [
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
    ],
});
try {
    const page = await browser.newPage({ viewport: { width: 760, height: 860 } });
    const errors = [];
    page.on("pageerror", (error) => errors.push(String(error)));
    page.on("console", (m) => m.type() === "error" && errors.push(m.text()));
    await page.goto(url);
    const result = page.locator("#result[data-checksum], #result[data-error]");
    await result.waitFor({ state: "attached", timeout: 180_000 }).catch((error) => {
        throw new Error(`the page did not finish: ${error.message}; page errors: ${errors}`);
    });
    const shown = await page.evaluate(() => {
        const text = (id) => document.getElementById(id).textContent;
        const result = document.getElementById("result").dataset;
        return {
            frames: Number(result.frames),
            checksum: result.checksum,
            error: result.error,
            population: Number(text("population")),
            frame_time: text("time"),
        };
    });
    await page.screenshot({ path: screenshot });
    shown.page_errors = errors;
    console.log(JSON.stringify(shown));
} finally {
    await browser.close();
}

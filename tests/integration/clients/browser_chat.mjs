// A person's chat in Debian's chromium (headless, driven by playwright-core from tests/node):
// opens the fixture's /chat page N times, each streaming one reply into the page, and waits
// for the page to say the stream ended. Prints the pages' titles, as JSON on stdout.
//   node browser_chat.mjs PORT MODEL N [SCHEME]   (https unless SCHEME says http)
const {chromium} = await import(
    new URL("../../node/node_modules/playwright-core/index.mjs", import.meta.url));
const [port, model, n, scheme = "https"] = process.argv.slice(2);
const browser = await chromium.launch({executablePath: "/usr/bin/chromium",
                                        args: ["--no-sandbox", "--disable-gpu"]});
const context = await browser.newContext({ignoreHTTPSErrors: true});
const titles = [];
try {
    for (let i = 0; i < Number(n); i++) {
        const page = await context.newPage();
        await page.goto(`${scheme}://127.0.0.1:${port}/chat?model=${encodeURIComponent(model)}`);
        await page.waitForFunction(() => /^(done|failed)/.test(document.title), null,
                                   {timeout: 30000});
        titles.push(await page.title());
        await page.close();
    }
} finally {
    await browser.close();
}
console.log(JSON.stringify(titles));

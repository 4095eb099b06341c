// Opens an --html report in Debian's chromium (headless, driven by playwright-core from
// tests/node) as a person would, and says what it found, as JSON on stdout: console errors,
// requests the page made, each section's charts (their counts, the counts their bars and
// points sum to, their axes' ticks and titles, what each says it measured, marks without a
// tooltip), tables (the values in their cells). Takes a screenshot of each section, of the
// groups the first SHOWN_GROUPS.
//
//   node open_report.mjs REPORT.html SCREENSHOT_DIR
const {chromium} = await import(
    new URL("../node/node_modules/playwright-core/index.mjs", import.meta.url));
const [report, shots] = process.argv.slice(2);
const browser = await chromium.launch({executablePath: "/usr/bin/chromium",
                                        args: ["--no-sandbox", "--disable-gpu"]});
const page = await browser.newPage({viewport: {width: 1400, height: 1000}});
const errors = [];
const requests = [];
page.on("console", (m) => m.type() === "error" && errors.push(m.text()));
page.on("pageerror", (e) => errors.push(String(e)));
page.on("request", (r) => requests.push(r.url()));
const url = "file://" + report;
await page.goto(url, {waitUntil: "load"});
const found = await page.evaluate(() => {
    const num = (el, a) => Number(el.getAttribute(a));
    const charts = (root) => [...root.querySelectorAll("svg.chart")].map((svg) => ({
        chart: svg.dataset.chart,
        count: num(svg, "data-count"),
        bars: [...svg.querySelectorAll("rect[data-count]")].reduce((s, r) => s + num(r, "data-count"), 0),
        points: svg.querySelectorAll("circle[data-point]").length,
        bands: [...svg.querySelectorAll("rect[data-share]")].length,
        // what a reader needs to read it: each axis's ticks and title, what was measured,
        // and a tooltip on every bar and point
        ticks: Object.fromEntries(["x", "y"].map((a) => [a,
            svg.querySelectorAll(`g[data-axis="${a}"] text.tick`).length])),
        axis_titles: Object.fromEntries(["x", "y"].map((a) => [a,
            (svg.querySelector(`g[data-axis="${a}"] text.axis-title`) || {}).textContent || ""])),
        measured: (svg.closest("figure").querySelector(".measured") || {}).textContent || "",
        marks: svg.querySelectorAll("rect[data-count], rect[data-share], circle[data-point]").length,
        untitled: [...svg.querySelectorAll("rect[data-count], rect[data-share], circle[data-point]")]
            .filter((m) => !(m.querySelector("title") || {}).textContent).length,
    }));
    const stats = (root) => Object.fromEntries([...root.querySelectorAll("tr[data-stat]")].map(
        (tr) => [tr.dataset.stat, [...tr.querySelectorAll("td")].map((td) => Number(td.dataset.value))]));
    return {
        groups: [...document.querySelectorAll("section.group")].map((s) => ({
            comm: s.dataset.comm, role: s.dataset.role, api: s.dataset.api, model: s.dataset.model,
            pod: s.dataset.pod,
            requests: num(s, "data-requests"), charts: charts(s), stats: stats(s),
            consumers: Object.fromEntries([...s.querySelectorAll("tr[data-consumer]")].map(
                (tr) => [tr.dataset.consumer, {requests: num(tr, "data-requests"),
                                               judged: num(tr, "data-judged"),
                                               met: num(tr, "data-met")}]))})),
        sessions: [...document.querySelectorAll("tr[data-sessions]")].reduce(
            (s, tr) => s + num(tr, "data-sessions"), 0),
        slowest: Object.fromEntries([...document.querySelectorAll("table[data-table]")].map(
            (t) => [t.dataset.table, [...t.querySelectorAll("tr[data-id]")].map((tr) => Number(tr.dataset.id))])),
        steps: [...document.querySelectorAll("h3[data-steps]")].reduce((s, h) => s + num(h, "data-steps"), 0),
        step_charts: charts(document.querySelector("#engines") || document.createElement("div")),
        health: [...document.querySelectorAll("#health .warn")].map((p) => p.textContent),
        health_requests: num(document.querySelector("#health"), "data-requests"),
    };
});
// each screenshot waits for the page to settle: a report of 86 groups took 30 s whole
const SHOWN_GROUPS = 6;
const sections = await page.$$("section");
let groups = 0;
for (let i = 0; i < sections.length; i++) {
    if (await sections[i].evaluate((s) => s.classList.contains("group")) && groups++ >= SHOWN_GROUPS)
        continue;
    await sections[i].screenshot({path: `${shots}/section-${i}.png`});
}
await browser.close();
console.log(JSON.stringify({errors, requests: requests.filter((u) => u !== url), ...found}));

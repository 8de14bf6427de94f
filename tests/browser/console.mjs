// SPDX-License-Identifier: BSD-2-Clause
// console.mjs: herald's console page at GET /, driven by the test.
// Arguments: {origin, path: what to load after the origin ("/" by default,
// "/?topic=a&history=10" say), width, height: the viewport (1000 x 800 by
// default)}. Once the page's stream is open it reports `ready`; then each
// line the test sends is one command, answered with {value, problems}:
//   {until: "JS expression", ms}   wait until it holds in the page
//   {eval: "JS expression"}        its value
//   {list: true}                   the value is #events, oldest first:
//                                  [{id, past (shown as history), text}]
//   {publish: marker}              publish `marker` with the page's own form
//                                  and wait for #events to show it: the
//                                  value is {id, ms, publishAnswer}
//   {shot: path, fullPage, width, height}  a screenshot (viewport resized
//                                  first when width and height are given)
//   {done: true}                   end; the result is the problems seen
// `problems` lists what the page reported as errors (an exception, a
// Content-Security-Policy violation, a failed load): a test expects none.
import { args, scenario, step } from './lib.mjs';

// The elements of #events, oldest first: {id, past, text}.
const LIST = `[...document.querySelectorAll('#events [data-id]')].reverse().map((li) => ({
  id: li.getAttribute('data-id'), past: li.getAttribute('data-past') === 'yes', text: li.textContent }))`;

// Wait until the JS expression holds in the page. Polled from here with
// page.evaluate: waitForFunction would evaluate the string inside the page,
// which the page's Content-Security-Policy (rightly) forbids.
async function until(page, expr, ms) {
  const end = Date.now() + ms;
  while (!(await page.evaluate(expr))) {
    if (Date.now() > end) throw new Error(`not true within ${ms} ms: ${expr}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

scenario(async (b) => {
  const problems = [];
  b.page.on('pageerror', (e) => problems.push(`exception: ${e.message}`));
  b.page.on('console', (m) => {
    // Refusals the page expects and handles (presence: 404 where herald has
    // none, or 403; metrics: 401 or 403 where metrics_access keeps the
    // browser out) are logged by Chromium as failed loads: not a problem.
    const url = m.location().url || '';
    const expected = (/\/api\/presence$/.test(url) && /status of 40[34]/.test(m.text())) ||
      (/\/metrics$/.test(url) && /status of 40[13]/.test(m.text()));
    if (m.type() === 'error' && !expected) problems.push(`console: ${m.text()}`);
  });
  await b.page.setViewportSize({ width: args.width || 1000, height: args.height || 800 });
  const res = await b.page.goto(args.origin + (args.path || '/'));
  if (!res || res.status() !== 200) throw new Error(`GET / answered ${res && res.status()}`);
  await until(b.page, 'document.querySelector("#state")?.getAttribute("data-state") === "open"', 10000);
  let cmd = await step('ready', { value: await b.page.evaluate(LIST), problems });
  while (!cmd.done) {
    let value;
    if (cmd.until) await until(b.page, cmd.until, cmd.ms ?? 10000);
    if (cmd.eval) value = await b.page.evaluate(cmd.eval);
    if (cmd.list) value = await b.page.evaluate(LIST);
    if (cmd.publish) {
      await b.page.fill('#pub-data', cmd.publish);
      const t0 = Date.now();
      await b.page.click('#pub-send');
      const find = (m) => [...document.querySelectorAll('#events [data-id]')].find((li) => li.textContent.includes(m));
      const handle = await b.page.waitForFunction(find, cmd.publish, { timeout: 5000, polling: 10 });
      const ms = Date.now() - t0;
      const id = await handle.evaluate((li) => li.getAttribute('data-id'));
      await until(b.page, '/^201/.test(document.querySelector("#pub-result").textContent)', 5000);
      value = { id, ms, publishAnswer: await b.page.textContent('#pub-result') };
    }
    if (cmd.shot) {
      if (cmd.width && cmd.height) await b.page.setViewportSize({ width: cmd.width, height: cmd.height });
      await b.page.screenshot({ path: cmd.shot, fullPage: !!cmd.fullPage });
    }
    cmd = await step('ok', { value, problems });
  }
  return { problems };
});

// console.mjs: herald's console page at GET /. Arguments: {origin, marker,
// shot}. Waits for the page's stream to be open, publishes `marker` with
// the page's own form, and times how long until #events shows it as an
// element with data-id. The result: {id, ms, publishAnswer}; a screenshot of
// the page is saved to `shot`.
import { args, scenario } from './lib.mjs';

scenario(async (b) => {
  const res = await b.page.goto(args.origin + '/');
  if (!res || res.status() !== 200) throw new Error(`GET / answered ${res && res.status()}`);
  await b.until('document.querySelector("#state")?.getAttribute("data-state") === "open"', 10000);
  await b.page.fill('#pub-data', args.marker);
  const t0 = Date.now();
  await b.page.click('#pub-send');
  const find = (m) => [...document.querySelectorAll('#events [data-id]')].find((li) => li.textContent.includes(m));
  const handle = await b.page.waitForFunction(find, args.marker, { timeout: 5000, polling: 10 });
  const ms = Date.now() - t0;
  const id = await handle.evaluate((li) => li.getAttribute('data-id'));
  await b.until('/^201/.test(document.querySelector("#pub-result").textContent)', 5000);
  const publishAnswer = await b.page.textContent('#pub-result');
  await b.page.screenshot({ path: args.shot, fullPage: true });
  return { id, ms, publishAnswer };
});

// SPDX-License-Identifier: BSD-2-Clause
// lib.mjs: what every browser scenario shares. Debian's Chromium, launched
// by playwright-core headless with a fresh profile and only loopback to talk
// to; EventSources opened in the page that record what they see; steps at
// which the Python test acts (publishes, restarts herald) before the page
// goes on; and the one JSON line of results the test asserts on.
//
// A scenario script is `scenario(async (b) => { ...; return result; })`
// (or `nodeScenario(async () => ...)` for one without a browser), run as
// `node SCRIPT.mjs '<json arguments>'`. Each step prints
// {"step": NAME, ...} and waits for one JSON line on stdin; the end prints
// {"result": ...} or {"error": "..."}.
import { chromium } from 'playwright-core';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

// Without the background-networking flags Chromium tries its own services,
// which a closed network refuses; QUIC is off so nothing but TCP to loopback.
const FLAGS = [
  '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
  '--disable-component-update', '--disable-sync',
];

export const args = JSON.parse(process.argv[2] || '{}');

const input = createInterface({ input: process.stdin });
const lines = [];
let waiting = null;
input.on('line', (line) => {
  if (waiting) {
    const w = waiting;
    waiting = null;
    w(line);
  } else {
    lines.push(line);
  }
});

function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n');
}

// Tell the test we reached `name` (with data) and wait for its answer.
export async function step(name, data = {}) {
  emit({ step: name, ...data });
  const line = lines.length ? lines.shift() : await new Promise((r) => (waiting = r));
  return line ? JSON.parse(line) : {};
}

// Runs in the page: EventSources by name, each recording its opens, errors
// and events (id, type, data, time), with performance.now() as the clock.
function installRecorder() {
  const sources = {};
  const recs = {};
  window.esOpen = (name, url, opts) => {
    const rec = { url, opens: [], errors: [], events: [] };
    const es = new EventSource(url, opts || {});
    es.onopen = () => rec.opens.push(performance.now());
    es.onerror = () => rec.errors.push(performance.now());
    const onEvent = (e) => rec.events.push({ id: e.lastEventId, type: e.type, data: e.data, t: performance.now() });
    for (const type of ['message', 'reset', 'too_large']) es.addEventListener(type, onEvent);
    sources[name] = es;
    recs[name] = rec;
  };
  window.esClose = (name) => sources[name].close();
  window.esCount = (name) => recs[name].events.length;
  window.esAllOpen = () => Object.values(sources).every((es) => es.readyState === EventSource.OPEN);
  window.esOpenCount = () => Object.values(sources).filter((es) => es.readyState === EventSource.OPEN).length;
  window.esState = () => {
    const out = {};
    for (const [k, r] of Object.entries(recs)) out[k] = { ...r, readyState: sources[k].readyState };
    return out;
  };
}

// The page-side handle a scenario gets.
class Browser {
  constructor(context, page) {
    this.context = context;
    this.page = page;
  }

  // Load url (herald's origin) and set up the recorder in it.
  async load(url) {
    const res = await this.page.goto(url);
    await this.page.evaluate(installRecorder);
    return res ? res.status() : 0;
  }

  // streams: {name: url} or {name: [url, {withCredentials: true}]}
  async open(streams) {
    for (const [name, v] of Object.entries(streams)) {
      const [url, opts] = Array.isArray(v) ? v : [v, {}];
      await this.page.evaluate(([n, u, o]) => window.esOpen(n, u, o), [name, url, opts]);
    }
  }

  async close(name) {
    await this.page.evaluate((n) => window.esClose(n), name);
  }

  // Wait until the JS expression, evaluated in the page, is true.
  async until(expr, ms = 10000) {
    await this.page.waitForFunction(expr, null, { timeout: ms, polling: 20 });
  }

  async state() {
    return this.page.evaluate(() => window.esState());
  }

  sleep(ms) {
    return new Promise((r) => setTimeout(r, ms));
  }
}

// A scenario without a browser (a client library under Node): run fn(),
// print its result, exit; bounded by `seconds` whatever happens in between.
export async function nodeScenario(fn, { seconds = 35 } = {}) {
  let code = 0;
  const timer = setTimeout(() => {
    emit({ error: `the scenario did not end within ${seconds} s` });
    process.exit(3);
  }, seconds * 1000);
  try {
    emit({ result: await fn() });
  } catch (e) {
    emit({ error: String((e && e.stack) || e) });
    code = 1;
  } finally {
    clearTimeout(timer);
    input.close();
  }
  process.exit(code);
}

// Launch Chromium, run fn(browser), print its result, close everything.
// Bounded by `seconds` whatever happens in between.
export async function scenario(fn, { flags = [], seconds = 35 } = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'herald-chromium-'));
  let context = null;
  let code = 0;
  const timer = setTimeout(() => {
    emit({ error: `the scenario did not end within ${seconds} s` });
    process.exit(3); // playwright-core closes Chromium on exit
  }, seconds * 1000);
  try {
    context = await chromium.launchPersistentContext(dir, {
      executablePath: '/usr/bin/chromium',
      headless: true,
      args: [...FLAGS, ...flags],
    });
    const page = context.pages()[0] || (await context.newPage());
    emit({ result: await fn(new Browser(context, page)) });
  } catch (e) {
    emit({ error: String((e && e.stack) || e) });
    code = 1;
  } finally {
    clearTimeout(timer);
    if (context) await context.close().catch(() => {});
    rmSync(dir, { recursive: true, force: true });
    input.close();
  }
  process.exit(code);
}

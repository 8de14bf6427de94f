// SPDX-License-Identifier: BSD-2-Clause
// esclient.mjs: one reader built on the npm package eventsource-client,
// under Node (its fetch, no browser). Unlike a browser's EventSource, that
// client takes an id only from an event it dispatches (one with a data
// line), and sends it back as Last-Event-ID when it reconnects.
// Arguments: {url, seconds}. The record r it keeps: each request it made
// (the Last-Event-ID it sent, the status, X-Refused-Status), each event it
// dispatched (id, event, data), how many streams ended, and each reconnect
// delay it scheduled. Each line the test sends is one command, answered with
// the record:
//   {until: "JS expression over r", ms}   wait until it holds
//   {done: true}                          end; the result is the record
import { createEventSource } from 'eventsource-client';
import { args, nodeScenario, step } from './lib.mjs';

nodeScenario(
  async () => {
    const r = { requests: [], events: [], ends: 0, reconnects: [] };
    const recordingFetch = async (url, init) => {
      const req = { lastEventId: init.headers['Last-Event-ID'] ?? null, status: 0, refused: null };
      r.requests.push(req);
      const res = await fetch(url, init);
      req.status = res.status;
      req.refused = res.headers.get('x-refused-status');
      return res;
    };
    const es = createEventSource({
      url: args.url,
      fetch: recordingFetch,
      onMessage: (m) => r.events.push({ id: m.id ?? null, event: m.event ?? 'message', data: m.data }),
      onDisconnect: () => r.ends++,
      onScheduleReconnect: ({ delay }) => r.reconnects.push(delay),
    });
    const until = async (expr, ms) => {
      const holds = new Function('r', `return (${expr});`);
      const deadline = performance.now() + ms;
      while (!holds(r)) {
        if (performance.now() > deadline) throw new Error(`${expr} did not hold within ${ms} ms: ${JSON.stringify(r)}`);
        await new Promise((res) => setTimeout(res, 20));
      }
    };
    let cmd = await step('ready', { state: r });
    while (!cmd.done) {
      if (cmd.until) await until(cmd.until, cmd.ms ?? 10000);
      cmd = await step('ok', { state: r });
    }
    es.close();
    return r;
  },
  { seconds: args.seconds || 35 },
);

// SPDX-License-Identifier: BSD-2-Clause
// stream.mjs: EventSources in one page of herald's origin, driven by the
// test. Arguments: {page: URL to load (a blank document of the origin),
// streams: {name: url | [url, {withCredentials}]}, cookies: [playwright
// cookies], flags: [extra Chromium flags], open: how many must be open
// before the first step (all by default)}. Then each line the test sends is
// one command, answered with the streams' state:
//   {until: "JS expression", ms}   wait until it holds in the page
//   {close: [names]}               close those EventSources
//   {open: {name: url}}            open more
//   {sleep: ms}
//   {eval: "JS expression"}       its value, as `value` in the answer
//   {done: true}                   end; the result is the final state
import { args, scenario, step } from './lib.mjs';

scenario(
  async (b) => {
    if (args.cookies) await b.context.addCookies(args.cookies);
    const status = await b.load(args.page);
    if (status !== 200) throw new Error(`${args.page} answered ${status}`);
    await b.open(args.streams);
    const want = args.open ?? Object.keys(args.streams).length;
    await b.until(`esOpenCount() >= ${want}`, 15000);
    let cmd = await step('ready', { state: await b.state() });
    while (!cmd.done) {
      if (cmd.open) await b.open(cmd.open);
      if (cmd.close) for (const name of cmd.close) await b.close(name);
      if (cmd.sleep) await b.sleep(cmd.sleep);
      if (cmd.until) await b.until(cmd.until, cmd.ms ?? 10000);
      const value = cmd.eval ? await b.page.evaluate(cmd.eval) : undefined;
      cmd = await step('ok', { state: await b.state(), value });
    }
    return b.state();
  },
  { flags: args.flags || [], seconds: args.seconds || 35 },
);

// SPDX-License-Identifier: BSD-2-Clause
// mercure-conformance.config.mjs: herald's own Playwright configuration for
// the Mercure conformance suite (tests/mercure-conformance, kept as its
// authors wrote it). Debian's Chromium only, headless, loopback only; the
// hub is the herald tests/e2e/test_mercure_conformance.py starts and names
// in BASE_URL. Reports go to the terminal and artifacts to a temporary
// folder, so a run leaves nothing in the tree.
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));

export default {
  testDir: join(here, '..', 'mercure-conformance'),
  outputDir: process.env.CONFORMANCE_OUTPUT || join(tmpdir(), 'herald-mercure-conformance'),
  timeout: 10 * 1000,
  expect: { timeout: 5000 },
  forbidOnly: true,
  retries: 0,
  workers: 1,
  reporter: [['list']],
  use: {
    baseURL: process.env.BASE_URL,
    trace: 'off',
    ignoreHTTPSErrors: true,
  },
  projects: [
    {
      name: 'chromium',
      use: {
        browserName: 'chromium',
        launchOptions: {
          executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
          args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
                 '--disable-background-networking', '--disable-component-update', '--disable-sync'],
        },
      },
    },
  ],
};

# SPDX-License-Identifier: BSD-2-Clause
"""End-to-end: the Mercure protocol's public conformance suite
(tests/mercure-conformance, unchanged) run by Playwright's test runner with
Debian's Chromium against a real herald on loopback, through herald's own
configuration (tests/browser/mercure-conformance.config.mjs). Any failed
or missing test fails this one.

The suite's publisher token is an RFC 9068 access token signed with HS256
under the reference hub's development secret, for the audience
https://localhost/.well-known/mercure and the issuer https://localhost:
herald is configured to check exactly those. Its subscribers are
anonymous EventSources, so mercure_anonymous is on; the page they run in
is herald's console page at /.
"""
import os
import re
import subprocess
import tempfile

from harness import Herald

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPTS = os.path.join(ROOT, "tests", "browser")
SECRET = "!ChangeThisMercureHubJWTSecretKey!"


def test_mercure_conformance_suite_in_chromium():
    cli = os.path.join(SCRIPTS, "node_modules", "@playwright", "test", "cli.js")
    assert os.path.exists(cli), "@playwright/test is not installed: run make browser-deps"
    tmp = tempfile.mkdtemp(prefix="herald-test-")
    with open(os.path.join(tmp, "secret"), "w") as f:
        f.write(SECRET)
    conf = ("jwt_algorithm = HS256\njwt_secret_file = %s\njwt_audience = https://localhost/.well-known/mercure\n"
            "jwt_issuer = https://localhost\nmercure_anonymous = on\n" % os.path.join(tmp, "secret"))
    with Herald(dir=tmp, config=conf) as h:
        env = dict(os.environ)
        env.update({"BASE_URL": f"http://127.0.0.1:{h.port}/.well-known/mercure", "CUSTOM_ID": "1",
                    # The suite imports @playwright/test from its own folder,
                    # which has no node_modules: it is found here instead.
                    "NODE_PATH": os.path.join(SCRIPTS, "node_modules"),
                    "CONFORMANCE_OUTPUT": os.path.join(tmp, "playwright"), "CI": ""})
        r = subprocess.run(["node", cli, "test", "--config", os.path.join(SCRIPTS, "mercure-conformance.config.mjs")],
                           cwd=SCRIPTS, env=env, capture_output=True, text=True, timeout=240)
        out = r.stdout + r.stderr
        passed = re.search(r"^\s*(\d+) passed", out, re.M)
        assert r.returncode == 0 and passed and not re.search(r"^\s*\d+ (failed|flaky|skipped|did not run)", out,
                                                               re.M), out[-6000:]
        # The suite's ten publish cases, at the commit tests/mercure-conformance/README.md names.
        assert int(passed.group(1)) >= 10, out[-3000:]


test_mercure_conformance_suite_in_chromium.timeout = 300

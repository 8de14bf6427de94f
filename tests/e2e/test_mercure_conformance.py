# SPDX-License-Identifier: BSD-2-Clause
"""End-to-end: the Mercure protocol's public conformance suite
(tests/mercure-conformance, unchanged) run by Playwright's test runner with
Debian's Chromium against a real herald on loopback, through herald's own
configuration (tests/browser/mercure-conformance.config.mjs), once on one
node with the SQLite log and once on node A of two nodes sharing a Redis log
(a redis-server the test starts on loopback). Any failed or missing test
fails these.

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

from harness import Herald, RedisServer, request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPTS = os.path.join(ROOT, "tests", "browser")
SECRET = "!ChangeThisMercureHubJWTSecretKey!"


def run_suite(tmp, port):
    """The suite against the hub at port; asserts every case passed."""
    cli = os.path.join(SCRIPTS, "node_modules", "@playwright", "test", "cli.js")
    assert os.path.exists(cli), "@playwright/test is not installed: run make browser-deps"
    env = dict(os.environ)
    env.update({"BASE_URL": f"http://127.0.0.1:{port}/.well-known/mercure", "CUSTOM_ID": "1",
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


def conf_for(tmp):
    with open(os.path.join(tmp, "secret"), "w") as f:
        f.write(SECRET)
    return ("jwt_algorithm = HS256\njwt_secret_file = %s\njwt_audience = https://localhost/.well-known/mercure\n"
            "jwt_issuer = https://localhost\nmercure_anonymous = on\n" % os.path.join(tmp, "secret"))


def test_mercure_conformance_suite_in_chromium():
    tmp = tempfile.mkdtemp(prefix="herald-test-")
    with Herald(dir=tmp, config=conf_for(tmp), redis=None) as h:
        run_suite(tmp, h.port)


test_mercure_conformance_suite_in_chromium.timeout = 300


def test_mercure_conformance_suite_on_node_a_of_two_over_redis():
    """The same suite against node A of two nodes sharing one Redis log;
    node B publishes one update meanwhile, which node A's log then holds
    too (so the suite ran on a log another node writes)."""
    tmp = tempfile.mkdtemp(prefix="herald-test-")
    tmp_b = tempfile.mkdtemp(prefix="herald-test-")
    conf = conf_for(tmp)
    with RedisServer() as r, Herald(dir=tmp, config=conf, redis=r, redis_stream="conformance") as a, \
            Herald(dir=tmp_b, config=conf, redis=r, redis_stream="conformance") as b:
        st, _, _ = request(b.port, "POST", "/api/events",
                           '{"type":"message","topic":"from-b","data":"b","public":true}',
                           headers={"Content-Type": "application/json"})
        assert st == 201
        run_suite(tmp, a.port)
        assert any(e["topic"] == "from-b" for e in a.stored_events())
        assert len(a.stored_events()) > 10  # the suite's updates, in the shared log


test_mercure_conformance_suite_on_node_a_of_two_over_redis.timeout = 300

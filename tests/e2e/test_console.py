# SPDX-License-Identifier: BSD-2-Clause
"""The console page at GET /: served from the binary byte for byte as
src/api/console.html, with its security headers; HEAD gives the same head and
no body; other methods 405; `console = off` (file, flag, or a reload) makes
/ a 404 again. The page itself: relative URLs only, nothing from another
host, nothing its Content-Security-Policy forbids, and the element ids the
browser tests use; docs/console.md shows its screenshot. The page
at work (history, charts, figures refused) is tested in Chromium by
test_browser.py."""
import os
import re
import shutil
import signal
import subprocess
import tempfile
from html.parser import HTMLParser

from harness import Herald, HttpConn, check_refusal, connect, parse_head, publish, request, wait_until

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CSP = ("default-src 'self'; style-src 'self' 'unsafe-inline'; script-src 'self' 'unsafe-inline'; "
       "connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")

IDS = ["state", "reconnects", "events", "filter", "history", "apply", "readers", "rate", "rate-10s", "rate-1m",
       "charts", "chart-rate", "chart-readers", "chart-refusals", "chart-refusals-legend", "presence",
       "presence-list", "pub-type", "pub-topic", "pub-data", "pub-public", "pub-token", "pub-send", "pub-result"]


def _source():
    with open(os.path.join(ROOT, "src/api/console.html"), "rb") as f:
        return f.read()


def _check_head(st, hdrs, length):
    assert st == 200, (st, hdrs)
    assert hdrs.get("content-type") == "text/html; charset=utf-8", hdrs
    assert hdrs.get("cache-control") == "no-cache", hdrs
    assert hdrs.get("x-content-type-options") == "nosniff", hdrs
    assert hdrs.get("content-security-policy") == CSP, hdrs
    assert hdrs.get("content-length") == str(length), hdrs


def _raw_until_close(port, data):
    """Send raw bytes, read until herald closes; the bytes received."""
    s = connect(port)
    try:
        s.sendall(data)
        out = b""
        while True:
            d = s.recv(65536)
            if not d:
                return out
            out += d
    finally:
        s.close()


class _Page(HTMLParser):
    """Ids (with repeats), every URL-bearing attribute, and script text."""

    def __init__(self):
        super().__init__()
        self.ids, self.urls, self.scripts, self.external = [], [], [], []
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.append(a["id"])
        for name in ("src", "href", "action", "formaction", "poster", "data"):
            if name in a and a[name] is not None:
                self.urls.append((tag, name, a[name]))
        if tag == "script":
            self._in_script = True
            if "src" in a:
                self.external.append(a["src"])

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_script = False

    def handle_data(self, data):
        if self._in_script:
            self.scripts.append(data)


def _parse(body):
    p = _Page()
    p.feed(body.decode("utf-8"))
    p.close()
    return p


def test_get_serves_the_page_with_its_headers():
    with Herald() as h:
        st, hdrs, body = request(h.port, "GET", "/")
        _check_head(st, hdrs, len(body))
        assert body == _source(), "the page served differs from src/api/console.html"
        assert b"EventSource" in body
        # A query (the page reads ?topic= itself) is the same page.
        st, hdrs, body2 = request(h.port, "GET", "/?topic=news")
        _check_head(st, hdrs, len(body2))
        assert body2 == body


def test_head_has_the_same_head_and_no_body():
    with Herald() as h:
        _, get_hdrs, body = request(h.port, "GET", "/")
        raw = _raw_until_close(h.port, b"HEAD / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        head, sep, rest = raw.partition(b"\r\n\r\n")
        assert sep and rest == b"", f"HEAD answered with a body: {rest[:80]!r}"
        st, hdrs = parse_head(head)
        _check_head(st, hdrs, len(body))
        assert hdrs == get_hdrs, (hdrs, get_hdrs)
        # Keep-alive: a HEAD then a GET on one connection, pipelined; the
        # GET's answer starts right where the HEAD's head ends.
        raw = _raw_until_close(h.port, b"HEAD / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
                                       b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        head1, _, rest = raw.partition(b"\r\n\r\n")
        st, hdrs = parse_head(head1)
        _check_head(st, hdrs, len(body))
        assert hdrs.get("connection") == "keep-alive", hdrs
        head2, _, rest = rest.partition(b"\r\n\r\n")
        st, hdrs = parse_head(head2)
        _check_head(st, hdrs, len(body))
        assert rest == body


def test_many_requests_share_one_response():
    with Herald() as h:
        with HttpConn(h.port) as c:
            for _ in range(50):
                st, hdrs, body = c.request("GET", "/")
                _check_head(st, hdrs, len(body))
                assert body == _source()
            st, _, _ = c.request("GET", "/api/health")
            assert st == 200
        assert request(h.port, "GET", "/")[2] == _source()


def test_other_methods_are_405():
    with Herald() as h:
        for method, body in (("POST", b'{"data":"x"}'), ("PUT", b"x"), ("DELETE", None), ("OPTIONS", None)):
            st, hdrs, resp = request(h.port, method, "/", body=body)
            check_refusal(st, hdrs, resp, 405)
            assert hdrs.get("allow") == "GET, HEAD", (method, hdrs)
        # Nothing was published by the POST.
        assert publish(h.port, data="after") == 1


def test_console_off_is_404():
    for args, config in ((["--console", "off"], None), ([], "console = no\n")):
        with Herald(args=args, config=config) as h:
            for method in ("GET", "HEAD", "POST"):
                st, hdrs, body = request(h.port, method, "/")
                if method == "HEAD":
                    assert st == 404, (method, st)
                else:
                    check_refusal(st, hdrs, body, 404)
            st, _, _ = request(h.port, "GET", "/api/health")
            assert st == 200


def test_reload_turns_the_console_off_and_on():
    with Herald(config="console = on\n") as h:
        assert request(h.port, "GET", "/")[0] == 200
        cpath = os.path.join(h.dir, "herald.conf")
        for value, want in (("off", 404), ("on", 200)):
            with open(cpath, "w") as f:
                f.write(f"console = {value}\n")
            since = h.log_size()
            h.signal(signal.SIGHUP)
            h.wait_log(r"configuration reloaded", since=since)
            wait_until(lambda: request(h.port, "GET", "/")[0] == want, timeout=5, what=f"GET / is {want}")


def test_page_uses_relative_urls_only():
    body = _source()
    text = body.decode("utf-8")
    # No absolute or scheme-relative URL anywhere, in markup, style or script.
    assert not re.search(r"https?:", text, re.I), re.search(r".{0,40}https?:.{0,40}", text, re.I).group(0)
    assert "//" not in text, text[max(0, text.index("//") - 40):text.index("//") + 40]
    p = _parse(body)
    assert not p.external, f"scripts loaded from elsewhere: {p.external}"
    for tag, name, url in p.urls:
        assert url.startswith("data:") or not re.match(r"[a-z][a-z0-9+.-]*:|/", url, re.I), (tag, name, url)
    assert not re.search(r"@import|url\(", text), "a stylesheet fetches something"
    script = "\n".join(p.scripts)
    # The endpoints it talks to, each by a path relative to the page.
    assert re.search(r"new EventSource\(", script)
    assert '"api/events/stream' in script
    assert re.search(r'fetch\("metrics"', script)
    assert re.search(r'fetch\("api/events"', script)
    assert re.search(r'fetch\("api/health"', script)  # the newest id, where the history starts
    assert re.search(r'fetch\("api/presence"', script)
    for m in re.finditer(r'(?:fetch|EventSource)\(\s*"([^"]*)"', script):
        assert not m.group(1).startswith("/"), m.group(0)
    assert "innerHTML" not in script and "insertAdjacentHTML" not in script and "document.write" not in script
    # Nothing the policy's script-src forbids ('unsafe-eval' is not granted).
    assert not re.search(r"\beval\(|new Function\(|setTimeout\(\s*\"|setInterval\(\s*\"", script)
    assert '"Content-Type": "application/json"' in script
    assert "last_event_id=" in script and "topic=" in script


def test_page_has_the_element_ids():
    p = _parse(_source())
    missing = [i for i in IDS if i not in p.ids]
    assert not missing, f"ids missing from the page: {missing}"
    repeated = sorted({i for i in p.ids if p.ids.count(i) > 1})
    assert not repeated, f"ids used twice: {repeated}"


def test_page_script_parses():
    node = shutil.which("node")
    if not node:
        return  # the syntax is still covered by the browser tests
    script = "\n".join(_parse(_source()).scripts)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "console.js")
        with open(path, "w") as f:
            f.write(script)
        r = subprocess.run([node, "--check", path], capture_output=True, text=True, timeout=20)
        assert r.returncode == 0, r.stderr


def test_docs_show_the_console_screenshot():
    """docs/console.md's console section shows docs/console.png: a PNG of a phone's
    or a modest window's width, small enough to keep in the repository."""
    with open(os.path.join(ROOT, "docs", "console.md")) as f:
        page = f.read()
    section = page.split("## `GET /`: the console", 1)[1].split("\n## ", 1)[0]
    assert re.search(r"!\[[^\]]+\]\(console\.png\)", section), "the console section shows no screenshot"
    with open(os.path.join(ROOT, "docs", "console.png"), "rb") as f:
        png = f.read()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and png[12:16] == b"IHDR", png[:16]
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert 320 <= width <= 1280 and height <= 1600, (width, height)
    assert len(png) <= 200 * 1024, len(png)

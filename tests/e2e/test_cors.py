# SPDX-License-Identifier: BSD-2-Clause
"""allow_origin: CORS headers on the stream for pages on other origins."""
from harness import Herald, Stream, publish


def _stream(port, origin=None):
    s = Stream(port, headers={"Origin": origin} if origin else None)
    s.opening()
    return s


def test_no_cors_header_by_default():
    with Herald() as h:
        s = _stream(h.port, "https://app.example")
        assert "access-control-allow-origin" not in s.headers, s.headers
        s.close()


def test_any_origin():
    with Herald(args=["--allow-origin", "*"]) as h:
        s = _stream(h.port, "https://app.example")
        assert s.headers.get("access-control-allow-origin") == "*", s.headers
        eid = publish(h.port, data="cross")
        assert [e["id"] for e in s.events(1)] == [eid]
        s.close()


def test_listed_origins_only():
    with Herald(args=["--allow-origin", "https://app.example, http://localhost:3000"]) as h:
        for origin in ("https://app.example", "http://localhost:3000"):
            s = _stream(h.port, origin)
            assert s.headers.get("access-control-allow-origin") == origin, (origin, s.headers)
            assert s.headers.get("vary") == "Origin", s.headers
            eid = publish(h.port, data=origin)
            assert [e["data"] for e in s.events(1)] == [origin] and eid
            s.close()
        for origin in ("https://evil.example", "https://app.example.evil", None):
            s = _stream(h.port, origin)
            assert "access-control-allow-origin" not in s.headers, (origin, s.headers)
            s.close()


def test_bad_allow_origin_is_a_config_error():
    import subprocess
    from harness import HERALD_BIN
    for bad in ("app.example", "https://app.example/path", "https://a.example,*x"):
        r = subprocess.run([HERALD_BIN, "--allow-origin", bad, "--check-config"], capture_output=True, text=True,
                           timeout=10)
        assert r.returncode == 1 and "allow_origin" in r.stderr, (bad, r.returncode, r.stderr)

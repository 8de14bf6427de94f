# SPDX-License-Identifier: BSD-2-Clause
"""End-to-end: the per-address stream cap (429 + Retry-After), counted per
client address (peer, or the X-Forwarded-For hop from a trusted proxy), and
the global reader cap (503 + Retry-After); non-stream requests still work."""
import time

from harness import Herald, Stream, check_refusal, connect, publish, request, wait_until


def _refusal(s, status):
    assert s.status == status, f"expected {status}, got {s.status} {s.headers}"
    ra = s.headers.get("retry-after")
    assert ra is not None and ra.isdigit() and int(ra) >= 1, f"Retry-After {ra!r}"
    check_refusal(s.status, s.headers, s.read_body(), status)


def _open_retry(port, timeout=5.0, **kw):
    """A stream that must become 200 once the server has noticed a close."""
    deadline = time.monotonic() + timeout
    while True:
        s = Stream(port, **kw)
        if s.status == 200 or time.monotonic() > deadline:
            return s
        s.read_body()
        s.close()
        time.sleep(0.05)


def test_per_address_limit():
    with Herald(args=["--per-address-limit", "3"]) as h:
        mine = [Stream(h.port) for _ in range(3)]
        for s in mine:
            assert s.status == 200, s.status
            s.opening()
        fourth = Stream(h.port)
        _refusal(fourth, 429)
        fourth.close()
        # Another client address is not affected.
        other = Stream(h.port, source="127.0.0.2")
        assert other.status == 200, f"stream from 127.0.0.2 got {other.status}"
        other.opening()
        # Non-stream requests are not capped.
        st, _, _ = request(h.port, "GET", "/api/health")
        assert st == 200
        # The readers at the cap still work.
        n = publish(h.port, data="x")
        for s in mine + [other]:
            assert [e["id"] for e in s.events(1, timeout=5)] == [n]
        # Closing one frees its slot.
        mine.pop().close()
        again = _open_retry(h.port)
        assert again.status == 200, f"after closing one, a new stream got {again.status}"
        mine.append(again)
        fifth = Stream(h.port)
        _refusal(fifth, 429)
        fifth.close()
        for s in mine + [other]:
            s.close()


def test_per_address_limit_counts_forwarded_client():
    # Loopback is a trusted proxy by default, so the X-Forwarded-For client
    # is the address that is counted.
    with Herald(args=["--per-address-limit", "2"]) as h:
        xff = {"X-Forwarded-For": "203.0.113.7"}
        a = [Stream(h.port, headers=xff) for _ in range(2)]
        assert [s.status for s in a] == [200, 200]
        third = Stream(h.port, headers=xff)
        _refusal(third, 429)
        third.close()
        # The proxy's own address (127.0.0.1) and another forwarded client are separate.
        b = Stream(h.port)
        assert b.status == 200, b.status
        c = Stream(h.port, headers={"X-Forwarded-For": "203.0.113.8"})
        assert c.status == 200, c.status
        for s in a + [b, c]:
            s.close()


def test_per_address_limit_zero_is_off():
    with Herald(args=["--per-address-limit", "0"]) as h:
        ss = [Stream(h.port) for _ in range(40)]  # more than the default 32
        assert all(s.status == 200 for s in ss), [s.status for s in ss]
        for s in ss:
            s.close()


def test_global_max_readers():
    with Herald(args=["--max-readers", "5"]) as h:
        ss = [Stream(h.port, source=f"127.0.0.{k + 1}") for k in range(5)]
        assert [s.status for s in ss] == [200] * 5
        sixth = Stream(h.port, source="127.0.0.9")
        _refusal(sixth, 503)
        sixth.close()
        st, _, body = request(h.port, "GET", "/api/health")
        assert st == 200, (st, body)
        n = publish(h.port, data="cap")
        for s in ss:
            assert [e["id"] for e in s.events(1, timeout=5)] == [n]
        ss.pop().close()
        again = _open_retry(h.port, source="127.0.0.9")
        assert again.status == 200, f"after closing one, a new stream got {again.status}"
        ss.append(again)
        for s in ss:
            s.close()


def test_forwarded_client_is_the_hop_the_proxy_added():
    # X-Forwarded-For "spoofed, real": the trusted proxy (loopback) appended
    # the real client last; whatever came before is the client's own claim.
    with Herald(args=["--per-address-limit", "1"]) as h:
        a = Stream(h.port, headers={"X-Forwarded-For": "198.51.100.1, 203.0.113.7"})
        assert a.status == 200, a.status
        b = Stream(h.port, headers={"X-Forwarded-For": "198.51.100.99, 203.0.113.7"})
        _refusal(b, 429)
        b.close()
        c = Stream(h.port, headers={"X-Forwarded-For": "203.0.113.7"})
        _refusal(c, 429)
        c.close()
        d = Stream(h.port, headers={"X-Forwarded-For": "203.0.113.7, 203.0.113.8"})
        assert d.status == 200, d.status
        a.close()
        d.close()


def test_forwarded_header_ignored_from_untrusted_peer():
    # Loopback not trusted: X-Forwarded-For from it is not believed, so every
    # stream counts against 127.0.0.1 whatever the header says.
    with Herald(args=["--per-address-limit", "1", "--trusted-proxies", "10.0.0.0/8"]) as h:
        a = Stream(h.port, headers={"X-Forwarded-For": "203.0.113.1"})
        assert a.status == 200, a.status
        b = Stream(h.port, headers={"X-Forwarded-For": "203.0.113.2"})
        _refusal(b, 429)
        b.close()
        a.close()


def test_unix_socket_clients_counted_by_forwarded_address():
    # A proxy on the unix socket (trusted by default) forwards many clients:
    # each is counted on its own X-Forwarded-For address.
    with Herald(unix=True, args=["--per-address-limit", "1"]) as h:
        a = Stream(path=h.sock_path, headers={"X-Forwarded-For": "203.0.113.1"})
        b = Stream(path=h.sock_path, headers={"X-Forwarded-For": "203.0.113.2"})
        assert (a.status, b.status) == (200, 200)
        c = Stream(path=h.sock_path, headers={"X-Forwarded-For": "203.0.113.1"})
        _refusal(c, 429)
        c.close()
        a.close()
        b.close()


def _herald_with_nofile(n, args):
    """A Herald whose RLIMIT_NOFILE is n, soft and hard (herald may raise
    its soft limit to the hard one, so both are lowered, in the child only)."""
    import resource
    return Herald(args=args, preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (n, n)))


def _try_stream(port):
    """(status or None, stream): None when the connection closed or hung
    without any answer."""
    try:
        s = Stream(port, timeout=3)
    except (AssertionError, OSError):
        return None, None
    return s.status, s


def _readers_until_refused(port, got, most=80):
    """Open HTTP/1.1 readers one by one into got ((status, stream) pairs)
    until one is refused; assert that the last is a 503 under a 64-fd limit
    after between 10 and 63 admitted. Returns the count admitted."""
    for _ in range(most):
        st, s = _try_stream(port)
        got.append((st, s))
        if st == 503:
            break
    statuses = [st for st, _ in got]
    assert statuses[-1] == 503, f"no 503 within {most} readers under a 64-fd limit: {statuses}"
    assert all(st == 200 for st in statuses[:-1]), statuses
    assert 10 <= len(statuses) - 1 < 64, f"{len(statuses) - 1} readers admitted under a 64-fd limit"
    return len(statuses) - 1


def test_max_readers_derived_from_fd_limit():
    # max_readers 0: derived from RLIMIT_NOFILE, so a reader beyond it gets
    # 503 instead of herald running out of descriptors.
    with _herald_with_nofile(64, ["--per-address-limit", "0"]) as h:
        got = []
        try:
            _readers_until_refused(h.port, got)
            n = publish(h.port, data="fd")
            for st, s in got[:-1]:
                assert [e["id"] for e in s.events(1, timeout=5)] == [n]
        finally:
            for _, s in got:
                if s:
                    s.close()
        st, _, _ = request(h.port, "GET", "/api/health")
        assert st == 200


test_max_readers_derived_from_fd_limit.timeout = 60


def test_survives_running_out_of_descriptors():
    # Plain connections are not capped by max_readers: 90 of them holding
    # half-sent heads under a 64-fd limit make accept() hit EMFILE. herald
    # must neither die nor spin; once they close it serves again.
    with _herald_with_nofile(64, ["--per-address-limit", "0"]) as h:
        socks = []
        try:
            for _ in range(90):
                try:
                    socks.append(connect(h.port, timeout=2))
                except OSError:
                    break
            for s in socks:
                try:
                    s.sendall(b"GET /api/health HTTP/1.1\r\nHost: x\r\n")
                except OSError:
                    pass
            time.sleep(0.5)  # let herald hit the limit with everything pending
            assert h.proc.poll() is None, f"herald died at the fd limit:\n{h.log()}"
            cpu0 = _cpu_ticks(h.pid)
            time.sleep(1.0)
            spin = _cpu_ticks(h.pid) - cpu0
            assert spin < 50, f"herald used {spin} CPU ticks in 1 s while out of descriptors (spinning?)"
        finally:
            for s in socks:
                s.close()
        wait_until(lambda: _health_ok(h.port), timeout=10, what="health after the descriptors were freed")
        s = Stream(h.port)
        assert s.status == 200
        s.close()


test_survives_running_out_of_descriptors.timeout = 60


def _health_ok(port):
    try:
        return request(port, "GET", "/api/health", timeout=1)[0] == 200
    except (AssertionError, OSError):
        return False


def _cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return int(fields[11]) + int(fields[12])  # utime + stime

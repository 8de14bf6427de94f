# SPDX-License-Identifier: BSD-2-Clause
"""End-to-end: the holes a review and a new user found, each shut and kept
shut: a stream that keeps its head when it falls behind in its first pass,
clients that cannot pin memory by not reading, publishing that no web page
can trigger, a client address that cannot be spoofed with a second header
line, a database replaced under herald, ids across the whole int64 range,
100 Continue only for requests that will be taken, and keep-alive timing."""
import json
import os
import re
import signal
import socket
import subprocess
import time

from harness import (Herald, HttpConn, Stream, check_refusal, connect, publish, raw_exchange,
                     read_response, request, sqlite, wait_until)


def _health(h):
    st, _, body = request(h.port, "GET", "/api/health")
    assert st == 200, st
    return json.loads(body)


def _read_raw(sock, until, limit, timeout=10.0):
    """Bytes from sock until `until` appears (or limit bytes, or timeout)."""
    buf = b""
    deadline = time.monotonic() + timeout
    while until not in buf and len(buf) < limit:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        sock.settimeout(left)
        try:
            d = sock.recv(1 << 20)
        except socket.timeout:
            break
        if not d:
            break
        buf += d
    return buf


# 1. A new stream keeps its head (and a response queued before it) when the
# fan-out of its first pass pushes it past queue_limit.
def _catchups(h):
    body = request(h.port, "GET", "/metrics")[2].decode()
    return int(float(re.search(r"^herald_readers_to_catchup_total (\S+)$", body, re.M).group(1)))


def test_stream_head_survives_a_drop_in_its_first_pass():
    # Whether herald reads the row before or after the stream joins depends
    # on the order of its wake-ups; the rounds where the reader fell behind
    # at once (counted by herald) are the ones that test the drop.
    dropped = 0
    with Herald(args=["--queue-limit", "64k"]) as h:
        for round in range(8):
            s = connect(h.port)
            wait_until(lambda: _health(h)["connections"] >= 2, what="the connection accepted")
            before = _catchups(h)
            os.kill(h.pid, signal.SIGSTOP)
            try:
                # A keep-alive request, then the stream, in one send; then a
                # row too big for the queue, committed while herald is stopped.
                s.sendall(b"GET /api/health HTTP/1.1\r\nHost: x\r\n\r\n"
                          b"GET /api/events/stream HTTP/1.1\r\nHost: x\r\n\r\n")
                sqlite(h.db, "INSERT INTO events(type,topic,data,public)"
                       " VALUES('big','t',replace(hex(zeroblob(153600)),'0','x'),1)")
            finally:
                os.kill(h.pid, signal.SIGCONT)
            buf = _read_raw(s, b": stream open\n\n", 1 << 20)
            assert buf.startswith(b"HTTP/1.1 200 "), f"round {round}: health answer missing: {buf[:120]!r}"
            i = buf.find(b"\r\n\r\n")
            head_len = int(re.search(rb"Content-Length: (\d+)", buf[:i]).group(1))
            rest = buf[i + 4 + head_len:]
            assert rest.startswith(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream"), \
                f"round {round}: the stream's head was dropped: {rest[:120]!r}"
            if _catchups(h) > before:
                dropped += 1
                rest += _read_raw(s, b"event: big", 4 << 20)
                assert b"event: big" in rest, f"round {round}: the event never came: {rest[:300]!r}"
            s.close()
            if dropped >= 2:
                break
    assert dropped, "no round had the reader fall behind in its first pass"


# 2. A client that sends requests but never reads cannot pin memory or a
# descriptor: what is queued for it stays under the pause threshold, and it
# is closed once it has taken nothing for stall_timeout.
def test_pipelining_client_that_never_reads_is_bounded_and_closed():
    env = {"ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0:quarantine_size_mb=0"}
    with Herald(args=["--stall-timeout", "2s", "--header-timeout", "1s"], env=env) as h:
        for _ in range(3):  # warm up the allocator
            request(h.port, "GET", "/metrics")
        base = h.rss_kb()
        req = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"
        socks = []
        for _ in range(10):
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.connect(("127.0.0.1", h.port))
            s.setblocking(False)
            sent = 0
            payload = req * 2000
            deadline = time.monotonic() + 3
            while sent < len(payload) and time.monotonic() < deadline:
                try:
                    sent += s.send(payload[sent:])
                except BlockingIOError:
                    time.sleep(0.01)
            socks.append(s)
        time.sleep(1.0)
        grown = h.rss_kb() - base
        # Ten clients, each held to about 1 MiB of unwritten answers
        # (a metrics page is ~6 KB; unbounded, each would hold ~12 MB).
        assert grown < 40 * 1024, f"RSS grew {grown} KiB for 10 clients that never read"
        wait_until(lambda: _health(h)["connections"] <= 1, timeout=8,
                   what="herald to close clients that took no bytes for stall_timeout")
        assert "no bytes of its" in h.log(), h.log()[-2000:]
        for s in socks:
            s.close()


def test_refused_client_that_never_reads_is_closed():
    # More answers than the socket buffers hold, then half a request: the
    # 408 (or the stall) must still end the connection, not leave it with
    # its output queued and no timer.
    with Herald(args=["--stall-timeout", "1s", "--header-timeout", "1s"]) as h:
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2048)
        s.connect(("127.0.0.1", h.port))
        s.setblocking(False)
        payload = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n" * 2000 + b"GET /nope HTTP/1.1\r\nHo"
        sent = 0
        deadline = time.monotonic() + 3
        while sent < len(payload) and time.monotonic() < deadline:
            try:
                sent += s.send(payload[sent:])
            except BlockingIOError:
                time.sleep(0.01)
        wait_until(lambda: _health(h)["connections"] <= 1, timeout=8, what="the non-reading client closed")
        s.close()


# 3. Publishing without a token cannot be triggered by a web page.
def test_publish_needs_a_json_content_type():
    with Herald() as h:
        for ctype in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
                      "application/jsonp", None):
            hd = {"Content-Type": ctype} if ctype else {}
            body = b'{"data":"x","public":true}'
            head = b"POST /api/events HTTP/1.1\r\nHost: 127.0.0.1\r\n" + \
                b"".join(f"{k}: {v}\r\n".encode() for k, v in hd.items()) + \
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
            st, hdrs, rb = raw_exchange(h.port, head + body)
            check_refusal(st, hdrs, rb, 415)
        st, _, rb = request(h.port, "POST", "/api/events", b'{"data":"x"}',
                            headers={"Content-Type": "application/json; charset=utf-8"})
        assert st == 201, (st, rb)
        assert sqlite(h.db, "SELECT count(*) FROM events") == "1"
        assert re.search(r"refused 127\.0\.0\.1 POST /api/events: 415", h.log()), h.log()[-2000:]


def test_tokenless_publish_refuses_other_sites():
    with Herald() as h:
        cases = [
            ({"Origin": "https://attacker.example"}, 403),
            ({"Origin": "null"}, 403),
            ({"Sec-Fetch-Site": "cross-site"}, 403),
            ({"Sec-Fetch-Site": "same-site"}, 403),
            ({"Host": "attacker.example"}, 403),
            ({"Host": "attacker.example:8199", "Origin": "http://attacker.example:8199",
              "Sec-Fetch-Site": "same-origin"}, 403),  # DNS rebinding
        ]
        for hd, want in cases:
            st, hdrs, body = request(h.port, "POST", "/api/events", {"data": "x", "public": True}, headers=hd)
            check_refusal(st, hdrs, body, want)
        assert sqlite(h.db, "SELECT count(*) FROM events") == "0"
        for hd in ({"Origin": f"http://127.0.0.1:{h.port}", "Sec-Fetch-Site": "same-origin"},
                   {"Origin": "http://localhost:3000", "Host": "localhost:8199"},
                   {"Host": "[::1]:8199", "Sec-Fetch-Site": "none"}):
            st, _, body = request(h.port, "POST", "/api/events", {"data": "ok", "public": True}, headers=hd)
            assert st == 201, (hd, st, body)
    with Herald(args=["--publish-token", "tok"]) as h:
        # With a token the page would need the secret: Origin does not matter.
        st, _, body = request(h.port, "POST", "/api/events", {"data": "x"},
                              headers={"Authorization": "Bearer tok", "Origin": "https://app.example",
                                       "Host": "events.example"})
        assert st == 201, (st, body)


def test_malformed_host_is_400():
    with Herald() as h:
        for host in (b"a b", b"exa mple.com", b"[::1", b"host:99999", b"host:8x", b"a/b", b"a@b"):
            st, hdrs, body = raw_exchange(h.port, b"GET /api/health HTTP/1.1\r\nHost: " + host + b"\r\n\r\n")
            check_refusal(st, hdrs, body, 400)
            assert b"Host" in body, body
        for host in (b"", b"example.com", b"example.com:8080", b"[::1]:80", b"127.0.0.1", b"xn--bcher-kva.example"):
            st, _, body = raw_exchange(h.port, b"GET /api/health HTTP/1.1\r\nHost: " + host + b"\r\n\r\n")
            assert st == 200, (host, st, body)


def test_startup_warns_when_tokenless_publish_may_be_open():
    with Herald(unix=True) as h:
        assert re.search(r"publish_token is not set and unix \S+ is a unix socket", h.log()), h.log()
    with Herald(unix=True, args=["--publish-token", "t"]) as h:
        assert "publish_token is not set" not in h.log(), h.log()
    with Herald() as h:
        assert "publish_token is not set" not in h.log(), h.log()


# 4. The client address behind a proxy.
def test_second_forwarded_line_cannot_spoof_the_client():
    with Herald(args=["--per-address-limit", "1"]) as h:
        def open_with(lines):
            hd = "".join(f"X-Forwarded-For: {v}\r\n" for v in lines)
            s = connect(h.port)
            s.sendall(f"GET /api/events/stream HTTP/1.1\r\nHost: x\r\n{hd}\r\n".encode())
            return s, _read_raw(s, b"\r\n\r\n", 65536)
        # The client writes a line of its own; the proxy appends the real
        # address on a second line. Both streams come from 203.0.113.9.
        a, head_a = open_with(["198.51.100.1", "203.0.113.9"])
        assert head_a.startswith(b"HTTP/1.1 200 "), head_a
        b, head_b = open_with(["198.51.100.2", "203.0.113.9"])
        assert head_b.startswith(b"HTTP/1.1 429 "), head_b
        a.close()
        b.close()


def test_ipv6_clients_counted_per_64():
    held = []

    def streams(h, addrs):
        out = []
        for ip in addrs:
            s = Stream(h.port, headers={"X-Forwarded-For": ip})
            out.append(s.status)
            held.append(s)  # open streams stay open while counted
        return out
    with Herald(args=["--per-address-limit", "1"]) as h:
        assert streams(h, ["2001:db8:1:2::1", "2001:db8:1:2:ffff::9", "2001:db8:1:3::1"]) == [200, 429, 200]
    with Herald(args=["--per-address-limit", "1", "--ipv6-prefix", "128"]) as h:
        assert streams(h, ["2001:db8:1:2::1", "2001:db8:1:2:ffff::9"]) == [200, 200]


# 5. A database deleted or replaced under herald.
def test_deleted_database_stops_herald_with_an_error():
    h = Herald()
    try:
        publish(h.port, data="before")
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(h.db + suffix):
                os.unlink(h.db + suffix)
        code = h.proc.wait(10)
        assert code == 1, code
        assert re.search(r"database file \S+ was deleted", h.log()), h.log()[-2000:]
    finally:
        h.kill()


def test_replaced_database_stops_herald_with_an_error():
    h = Herald()
    try:
        other = os.path.join(h.dir, "other.db")
        sqlite(other, "CREATE TABLE x(a)")
        os.rename(other, h.db)
        code = h.proc.wait(10)
        assert code == 1, code
        assert re.search(r"database file \S+ was replaced by another file", h.log()), h.log()[-2000:]
    finally:
        h.kill()


# 6. Ids across the whole int64 range, and rows inserted below the newest id.
def test_ids_across_the_int64_range():
    with Herald() as h:
        s = Stream(h.port)
        s.opening()
        big = 10 ** 18
        sqlite(h.db, f"INSERT INTO events(id,type,topic,data,public) VALUES({big},'t','n','far',1)")
        evs = s.events(1)
        assert [e["id"] for e in evs] == [big], evs
        s.close()
        # A browser reconnects with the id it got plus nothing: that id,
        # and ids above it, are resume points, never a 400.
        for last in (big, big + 1, 2 ** 63 - 1):
            r = Stream(h.port, headers={"Last-Event-ID": str(last)})
            assert r.status == 200, (last, r.status)
            r.close()
        for bad in (str(2 ** 63), "99999999999999999999", "-1", "1e5"):
            r = Stream(h.port, headers={"Last-Event-ID": bad})
            assert r.status == 400, (bad, r.status)
            r.close()


def test_row_inserted_below_the_newest_id_is_logged():
    with Herald() as h:
        publish(h.port, data="a")
        publish(h.port, data="b")
        publish(h.port, data="c")
        sqlite(h.db, "DELETE FROM events WHERE id = 2")
        sqlite(h.db, "INSERT INTO events(id,type,topic,data,public) VALUES(2,'t','n','late',1)")
        h.wait_log(r"1 row\(s\) were inserted into \S+ with an id below the newest one")


# 7. 100 Continue only for a request that will be taken.
def _expect_exchange(port, target, headers=""):
    s = connect(port)
    body = b'{"data":"x","public":true}'
    s.sendall(f"POST {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
              f"Content-Length: {len(body)}\r\nExpect: 100-continue\r\n{headers}\r\n".encode())
    first = _read_raw(s, b"\r\n\r\n", 65536, timeout=5)
    return s, body, first


def test_100_continue_only_after_routing_and_rights():
    with Herald(args=["--publish-token", "tok"]) as h:
        for target, hd, want in (("/nope", "", 404), ("/api/health", "", 405), ("/api/events", "", 401),
                                 ("/api/events", "Authorization: Bearer bad\r\n", 403)):
            s, _, first = _expect_exchange(h.port, target, hd)
            assert first.startswith(f"HTTP/1.1 {want} ".encode()), (target, first[:100])
            s.close()
        s, body, first = _expect_exchange(h.port, "/api/events", "Authorization: Bearer tok\r\n")
        assert first == b"HTTP/1.1 100 Continue\r\n\r\n", first
        s.sendall(body)
        st, _, rb = read_response(s)
        assert st == 201, (st, rb)
        s.close()


# 11. Keep-alive after a GET lasts keepalive_timeout, not header_timeout.
def test_idle_keepalive_after_get_lasts_keepalive_timeout():
    with Herald(args=["--header-timeout", "1s", "--keepalive-timeout", "4s"]) as h:
        with HttpConn(h.port, timeout=10) as c:
            st, _, _ = c.request("GET", "/api/health")
            assert st == 200
            time.sleep(2.0)
            st, _, _ = c.request("GET", "/api/health")
            assert st == 200, "closed before keepalive_timeout"
            assert c.wait_closed(timeout=8), "not closed after keepalive_timeout"


# 14. HEAD /api/health; refusals logged with method and path; nested db folders.
def test_head_health_and_refusal_log_lines():
    d = os.path.join("/tmp", f"herald-nested-{os.getpid()}")
    with Herald(db=os.path.join(d, "a", "b", "herald.db")) as h:
        s = connect(h.port)
        s.sendall(b"HEAD /api/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        raw = _read_raw(s, b"\0", 65536, timeout=5)
        s.close()
        head, _, rest = raw.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200 ") and rest == b"", raw
        assert int(re.search(rb"Content-Length: (\d+)", head).group(1)) > 0, head
        request(h.port, "DELETE", "/api/events/stream")
        h.wait_log(r"refused 127\.0\.0\.1 DELETE /api/events/stream: 405")
        assert os.path.exists(os.path.join(d, "a", "b", "herald.db"))
    subprocess.run(["rm", "-rf", d])


# 8 and 16. /metrics: who may read it, what it counts.
def test_metrics_access():
    with Herald() as h:  # local by default
        assert request(h.port, "GET", "/metrics")[0] == 200
        st, hd, body = request(h.port, "GET", "/metrics", headers={"X-Forwarded-For": "203.0.113.1"})
        check_refusal(st, hd, body, 403)
    with Herald(args=["--metrics-access", "token", "--metrics-token", "m3tr1cs"]) as h:
        st, hd, body = request(h.port, "GET", "/metrics")
        check_refusal(st, hd, body, 401)
        st, hd, body = request(h.port, "GET", "/metrics", headers={"Authorization": "Bearer nope"})
        check_refusal(st, hd, body, 403)
        st, _, body = request(h.port, "GET", "/metrics", headers={"Authorization": "Bearer m3tr1cs"})
        assert st == 200 and b"herald_readers" in body
        assert b"m3tr1cs" not in body
    with Herald(args=["--metrics-access", "any"]) as h:
        st, _, _ = request(h.port, "GET", "/metrics", headers={"X-Forwarded-For": "203.0.113.1"})
        assert st == 200


def test_metrics_count_by_code_and_cause():
    with Herald() as h:
        request(h.port, "GET", "/api/health")
        request(h.port, "GET", "/nope")
        request(h.port, "GET", "/nope")
        request(h.port, "GET", "/api/events/stream?topics=x")
        request(h.port, "POST", "/api/events", body={"type": "x", "topic": "t", "data": "d", "public": True, "extra": 1})
        raw_exchange(h.port, b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n")
        publish(h.port)
        st, _, body = request(h.port, "GET", "/metrics")
        text = body.decode()
        assert re.search(r'^herald_responses_total\{code="200"\} 1$', text, re.M), text
        assert re.search(r'^herald_responses_total\{code="201"\} 1$', text, re.M), text
        assert re.search(r'^herald_responses_total\{code="404"\} 2$', text, re.M), text
        assert re.search(r'^herald_refusals_total\{code="404",cause="not_found"\} 2$', text, re.M), text
        # Short stable names, never the sentence of the body and the log.
        causes = re.findall(r'^herald_refusals_total\{code="\d+",cause="([^"]*)"\} \d+$', text, re.M)
        assert sorted(causes) == ["bad_body", "bad_parameter", "bad_request", "not_found"], causes
        m = re.search(r"^process_start_time_seconds (\S+)$", text, re.M)
        assert m and abs(float(m.group(1)) - time.time()) < 120, text


def test_metrics_do_not_list_descriptors_per_request():
    # Process figures are sampled at most once a second: 30 requests in a
    # burst list /proc/self/fd at most twice (on Linux 6.2+ never: the
    # folder's size is the count).
    with Herald() as h:
        tr = subprocess.Popen(["strace", "-f", "-qq", "-e", "trace=getdents64,openat", "-p", str(h.pid)],
                              stderr=subprocess.PIPE, stdout=subprocess.DEVNULL)
        try:
            time.sleep(0.5)
            with HttpConn(h.port) as c:
                for _ in range(30):
                    assert c.request("GET", "/metrics")[0] == 200
        finally:
            time.sleep(0.2)
            tr.send_signal(signal.SIGINT)
            _, err = tr.communicate(timeout=10)
        opens = err.decode(errors="replace").count('"/proc/self/fd"')
        assert opens <= 2, f"/proc/self/fd opened {opens} times for 30 requests"


# 10. Smaller ones.
def test_read_token_change_ends_private_streams():
    conf = "read_token = old-token\n"
    with Herald(config=conf) as h:
        priv = Stream(h.port, query="token=old-token")
        pub = Stream(h.port)
        priv.opening()
        pub.opening()
        with open(os.path.join(h.dir, "herald.conf"), "w") as f:
            f.write("read_token = new-token\n")
        h.signal(signal.SIGHUP)
        assert priv.wait_closed(timeout=5), "stream with the old read token still open"
        publish(h.port, data="still here")
        assert [e["data"] for e in pub.events(1)] == ["still here"]
        r = Stream(h.port, query="token=old-token")
        assert r.status == 403, r.status


def test_token_query_parameter_is_percent_decoded():
    with Herald(args=["--read-token", "a+b/c=d"]) as h:
        s = Stream(h.port, query="token=a%2Bb%2Fc%3Dd")
        assert s.status == 200, s.status
        s.opening()
        publish(h.port, data="secret", public=False)
        assert [e["data"] for e in s.events(1)] == ["secret"]
        s.close()
        r = Stream(h.port, query="token=a%2Bb%2Fc%3De")
        assert r.status == 403, r.status

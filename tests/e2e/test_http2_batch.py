# SPDX-License-Identifier: BSD-2-Clause
"""End-to-end: a stream round writes each HTTP/2 connection's DATA frames
for all its streams in one send (herald_http2_round_sends_total counts
them, herald_http2_round_streams_total the stream writes they carried), in
the pool's io_uring batch or, with `io_uring = off`, one writev per
connection. Every stream still gets every event once and in order: many
streams on one connection, a stream whose window is spent beside streams
whose windows are open, streams reset while events flow, a connection whose
socket fills (the send's rest kept and sent on), io_uring off, and h2
over TLS (the round's frames joined into one SSL_write). The
load tool's h2c mode is smoke-tested here too (`load/readers --h2c`)."""
import json
import os
import socket
import subprocess
import time

from harness import Herald, publish, publish_many, wait_until
from test_http2 import H2Raw, _metric, _tls_herald, _tls_sock

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIG = 1 << 24


def _open(c, n):
    sids = [c.request() for _ in range(n)]
    c.wait(lambda: all("retry:" in c.text(s) for s in sids), what=f"{n} opening frames")
    return sids


def _all_have(c, sids, ids):
    return all(c.ids(s) == ids for s in sids)


def test_many_streams_on_one_connection_get_every_event_in_order_in_one_send_a_round():
    with Herald(args=["--per-address-limit", "0"]) as h:
        c = H2Raw(h.port, settings=[(0x4, BIG)], conn_window=BIG)
        try:
            sids = _open(c, 100)
            sends0 = _metric(h, "herald_http2_round_sends_total")
            ids = []
            for i in range(5):
                ids.append(publish(h.port, data=f"one {i}"))
                c.wait(lambda: _all_have(c, sids, ids), what=f"event {i} on all 100 streams")
            # A burst: events gather in rounds; every stream in order.
            ids += publish_many(h.port, [{"type": "m", "topic": "t", "data": f"burst {i}", "public": True}
                                         for i in range(60)])
            c.wait(lambda: _all_have(c, sids, ids), what="the burst on all 100 streams")
            sends = _metric(h, "herald_http2_round_sends_total") - sends0
            streams = _metric(h, "herald_http2_round_streams_total")
            assert 5 <= sends <= 65, sends
            assert streams >= 90 * sends, (streams, sends)
            assert not c.resets and c.goaway is None
        finally:
            c.close()
        assert h.log_ok()


def test_a_spent_window_holds_back_its_stream_only_and_it_resumes_in_order():
    with Herald(args=["--per-address-limit", "0"]) as h:
        c = H2Raw(h.port, settings=[(0x4, 100)], conn_window=BIG)  # INITIAL_WINDOW_SIZE 100
        try:
            sids = [c.request() for _ in range(30)]
            slow = sids[0]
            for s in sids[1:]:
                c.window_update(s, BIG)
            c.wait(lambda: all("retry:" in c.text(s) for s in sids[1:]), what="the opening frames")
            ids = []
            for i in range(20):
                ids.append(publish(h.port, data=f"{i} " + "w" * 120))
                c.wait(lambda: _all_have(c, sids[1:], ids), what=f"event {i} on the 29 open streams")
            c.pump(0.2)
            assert len(c.data.get(slow, b"")) <= 100
            c.window_update(slow, BIG)
            c.wait(lambda: c.ids(slow) == ids, what="every event on the stream whose window opened")
            assert _all_have(c, sids, ids) and not c.resets and c.goaway is None
            assert _metric(h, "herald_http2_round_sends_total") >= 20
        finally:
            c.close()
        assert h.log_ok()


def test_streams_reset_while_events_flow_leave_the_others_whole():
    with Herald(args=["--per-address-limit", "0"]) as h:
        c = H2Raw(h.port, settings=[(0x4, BIG)], conn_window=BIG)
        try:
            sids = _open(c, 60)
            gone, kept = sids[:20], sids[20:]
            events = [{"type": "m", "topic": "t", "data": f"{i} " + "r" * 200, "public": True} for i in range(80)]
            ids = publish_many(h.port, events[:40])
            c.pump(0.01)
            for s in gone:  # RST_STREAM CANCEL, between rounds
                c.send(3, 0, s, (8).to_bytes(4, "big"))
            ids += publish_many(h.port, events[40:])
            c.wait(lambda: _all_have(c, kept, ids), what="every event on the streams not reset")
            for s in gone:
                got = c.ids(s)
                assert got == ids[:len(got)], "a reset stream's events out of order"
            wait_until(lambda: _metric(h, "herald_http2_streams") == 40, what="the reset streams let go")
            more = publish(h.port, data="after")
            c.wait(lambda: _all_have(c, kept, ids + [more]), what="an event after the resets")
            assert c.goaway is None
            assert _metric(h, "herald_http2_round_sends_total") >= 2
        finally:
            c.close()
        assert h.log_ok()


def test_a_connection_whose_socket_fills_gets_the_rest_of_each_send_in_order():
    with Herald(args=["--per-address-limit", "0"]) as h:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect(("127.0.0.1", h.port))
        slow = H2Raw(sock=s, settings=[(0x4, BIG)], conn_window=BIG)
        fast = H2Raw(h.port, settings=[(0x4, BIG)], conn_window=BIG)
        try:
            slow_sids = _open(slow, 20)
            fast_sids = _open(fast, 20)
            # Not read meanwhile: the slow socket fills mid-send.
            ids = publish_many(h.port, [{"type": "m", "topic": "t", "data": f"{i} " + "s" * 1500, "public": True}
                                        for i in range(40)])
            fast.wait(lambda: _all_have(fast, fast_sids, ids), what="every event on the connection that reads")
            slow.wait(lambda: _all_have(slow, slow_sids, ids), timeout=20, what="every event once it reads")
            assert slow.goaway is None and fast.goaway is None and not slow.resets
            assert _metric(h, "herald_http2_round_sends_total") >= 2
        finally:
            slow.close()
            fast.close()
        assert h.log_ok()


def test_with_io_uring_off_a_round_is_one_writev_per_connection():
    with Herald(args=["--per-address-limit", "0"], config="io_uring = off\n") as h:
        c = H2Raw(h.port, settings=[(0x4, BIG)], conn_window=BIG)
        d = H2Raw(h.port, settings=[(0x4, BIG)], conn_window=BIG)
        try:
            a, b = _open(c, 50), _open(d, 50)
            ids = []
            for i in range(4):
                ids.append(publish(h.port, data=f"off {i}"))
                c.wait(lambda: _all_have(c, a, ids), what=f"event {i} on the first connection")
                d.wait(lambda: _all_have(d, b, ids), what=f"event {i} on the second")
            assert _metric(h, "herald_http2_round_sends_total") >= 8
            assert _metric(h, "herald_http2_round_streams_total") >= 400
        finally:
            c.close()
            d.close()
        assert h.log_ok()


def test_over_tls_a_round_is_one_write_per_connection():
    with _tls_herald(args=["--per-address-limit", "0"]) as h:
        c = H2Raw(sock=_tls_sock(h.tls_port), settings=[(0x4, BIG)], conn_window=BIG)
        try:
            sids = _open(c, 40)
            ids = []
            for i in range(4):
                ids.append(publish(h.port, data=f"tls {i} " + "t" * 300))
                c.wait(lambda: _all_have(c, sids, ids), what=f"event {i} on the 40 streams over TLS")
            ids += publish_many(h.port, [{"type": "m", "topic": "t", "data": f"tls burst {i}", "public": True}
                                         for i in range(30)])
            c.wait(lambda: _all_have(c, sids, ids), what="the burst on the 40 streams over TLS")
            sends = _metric(h, "herald_http2_round_sends_total")
            assert sends >= 4 and _metric(h, "herald_http2_round_streams_total") >= 30 * sends
            assert not c.resets and c.goaway is None
        finally:
            c.close()
        assert h.log_ok()


def test_load_readers_h2c_smoke():
    build = os.environ.get("HERALD_BUILD", "build")
    tool = os.path.join(ROOT, build, "load", "readers")
    r = subprocess.run([tool, "200", "--h2c", "--streams-per-conn", "50", "--events", "3", "--interval", "0.1",
                        "--idle", "0", "--no-floor"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    out = r.stdout.decode(errors="replace")
    assert r.returncode == 0, out[-2000:] + r.stderr.decode(errors="replace")[-2000:]
    j = json.loads([ln for ln in out.splitlines() if ln.startswith("{")][-1])
    assert j["h2c"] is True and j["connections"] == 4 and j["streams_per_conn"] == 50
    assert j["opened"] == 200 and j["complete"] == 200 and j["gaps"] == 0 and j["dups"] == 0, j
    assert j["cpu_ms_per_event"] >= 0


test_load_readers_h2c_smoke.timeout = 90

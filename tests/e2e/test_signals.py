# SPDX-License-Identifier: BSD-2-Clause
"""End-to-end: signals. SIGTERM and SIGINT drain and exit 0 within a few
seconds with readers connected, closing their streams and leaving the
database whole and checkpointed; SIGHUP rereads the config file (new caps
take effect, flags still win) without dropping connected readers, and a
broken file on SIGHUP leaves the server running on its old settings."""
import json
import os
import re
import signal
import time

from harness import Herald, Stream, publish, publish_many, request, sqlite, wait_until


def _drain_exit(sig):
    h = Herald(args=["--per-address-limit", "0"])
    try:
        readers = [Stream(h.port) for _ in range(20)]
        for s in readers:
            assert s.status == 200
            s.opening()
        ids = publish_many(h.port, [{"data": f"e{k}", "public": True} for k in range(50)])
        for s in readers[:5]:
            assert [e["id"] for e in s.events(50, timeout=5)] == ids
        t0 = time.monotonic()
        h.signal(sig)
        code = h.proc.wait(10)
        dt = time.monotonic() - t0
        assert code == 0, f"exit code {code} after {signal.Signals(sig).name}:\n{h.log()}"
        assert dt < 3.0, f"took {dt:.2f} s to exit after {signal.Signals(sig).name}"
        for s in readers:
            assert s.wait_closed(2), "a reader's stream was not closed"
            s.close()
    finally:
        if h.proc.poll() is None:
            h.kill()
        else:
            h.logf.close()
    # The database is whole, holds every event, and was checkpointed.
    wal = h.db + "-wal"
    assert not os.path.exists(wal) or os.path.getsize(wal) == 0, \
        f"WAL left with {os.path.getsize(wal)} bytes: not closed cleanly"
    assert sqlite(h.db, "PRAGMA integrity_check") == "ok"
    assert sqlite(h.db, "SELECT count(*), min(id), max(id) FROM events") == f"50|{ids[0]}|{ids[-1]}"


def test_sigterm_drains_and_exits_0():
    _drain_exit(signal.SIGTERM)


def test_sigint_drains_and_exits_0():
    _drain_exit(signal.SIGINT)


def _status_of_new_stream(port):
    s = Stream(port)
    st = s.status
    s.close()
    return st


def test_sighup_rereads_config_and_keeps_readers():
    h = Herald(config="per_address_limit = 2\nlog_level = info\n")
    with h:
        cpath = os.path.join(h.dir, "herald.conf")
        old = [Stream(h.port) for _ in range(2)]
        assert [s.status for s in old] == [200, 200]
        for s in old:
            s.opening()
        assert _status_of_new_stream(h.port) == 429
        with open(cpath, "w") as f:
            f.write("per_address_limit = 4\nlog_level = debug\n")
        h.signal(signal.SIGHUP)
        # The new cap applies once the reload is done: bounded poll.
        wait_until(lambda: _status_of_new_stream(h.port) == 200, timeout=5, what="per_address_limit 4 after SIGHUP")
        more = [Stream(h.port) for _ in range(2)]
        assert [s.status for s in more] == [200, 200]
        assert _status_of_new_stream(h.port) == 429
        # The readers from before the reload are still connected and served.
        n = publish(h.port, data="after-hup")
        for s in old + more:
            got = s.events(1, timeout=5)
            assert [(e["id"], e["data"]) for e in got] == [(n, "after-hup")], got
        # And the server is still healthy after a second SIGHUP with the same file.
        h.signal(signal.SIGHUP)
        n2 = publish(h.port, data="after-second-hup")
        for s in old + more:
            assert [e["id"] for e in s.events(1, timeout=5)] == [n2]
        for s in old + more:
            s.close()


def test_sighup_flags_still_override_file():
    h = Herald(config="per_address_limit = 5\n", args=["--per-address-limit", "1"])
    with h:
        cpath = os.path.join(h.dir, "herald.conf")
        a = Stream(h.port)
        assert a.status == 200
        assert _status_of_new_stream(h.port) == 429
        with open(cpath, "w") as f:
            f.write("per_address_limit = 6\nretry_ms = 1234\n")
        h.signal(signal.SIGHUP)
        # retry_ms from the file takes effect (it is not overridden) ...
        def reloaded():
            s = Stream(h.port, source="127.0.0.2")
            try:
                return s.status == 200 and s.read_exact(len(b"retry: 1234\n")) == b"retry: 1234\n"
            finally:
                s.close()
        wait_until(reloaded, timeout=5, what="retry_ms 1234 after SIGHUP")
        # ... while the flag still caps streams per address at 1.
        assert _status_of_new_stream(h.port) == 429
        a.close()


def test_sighup_with_broken_file_keeps_running():
    h = Herald(config="per_address_limit = 1\n")
    with h:
        cpath = os.path.join(h.dir, "herald.conf")
        a = Stream(h.port)
        assert a.status == 200
        a.opening()
        with open(cpath, "w") as f:
            f.write("per_address_limit = lots\n")
        mark = h.log_size()
        h.signal(signal.SIGHUP)
        h.wait_log(r"per_address_limit", timeout=5, since=mark)  # the error is logged, naming the key
        time.sleep(0.2)
        assert h.proc.poll() is None, f"herald exited on SIGHUP with a bad file:\n{h.log()}"
        # Old settings remain: still capped at 1, and the reader still served.
        assert _status_of_new_stream(h.port) == 429
        n = publish(h.port, data="still")
        assert [e["id"] for e in a.events(1, timeout=5)] == [n]
        a.close()


def test_sigterm_delivers_queued_events_before_closing():
    # Drain: events already accepted (201) and queued to readers are
    # written before the streams are closed.
    h = Herald(args=["--per-address-limit", "0"])
    try:
        readers = [Stream(h.port) for _ in range(10)]
        for s in readers:
            s.opening()
        ids = publish_many(h.port, [{"data": f"q{k}", "public": True} for k in range(200)])
        h.signal(signal.SIGTERM)
        for n, s in enumerate(readers):
            assert s.wait_closed(5), f"reader {n} not closed after SIGTERM"
            evs = s.events(timeout=0)
            assert [e["id"] for e in evs] == ids, f"reader {n} got {len(evs)} of {len(ids)} events before the close"
            s.close()
        assert h.proc.wait(10) == 0
    finally:
        if h.proc.poll() is None:
            h.kill()
        else:
            h.logf.close()


def test_sigterm_during_publishing_loses_no_acknowledged_event():
    import threading
    from harness import HttpConn
    h = Herald()
    acked = []
    try:
        def pub():
            try:
                with HttpConn(h.port, timeout=10) as c:
                    for k in range(100000):
                        st, _, body = c.request("POST", "/api/events", {"data": f"s{k}", "public": True})
                        if st != 201:
                            return
                        acked.append(json.loads(body)["id"])
            except (AssertionError, OSError):
                return  # the server went away: expected

        t = threading.Thread(target=pub)
        t.start()
        wait_until(lambda: len(acked) >= 200, timeout=10, what="200 publishes")
        h.signal(signal.SIGTERM)
        t.join(10)
        assert not t.is_alive()
        assert h.proc.wait(10) == 0, h.log()
    finally:
        if h.proc.poll() is None:
            h.kill()
        else:
            h.logf.close()
    stored = [int(x) for x in sqlite(h.db, "SELECT id FROM events ORDER BY id").split()]
    missing = sorted(set(acked) - set(stored))
    assert not missing, f"{len(missing)} acknowledged events not stored, e.g. {missing[:10]}"
    assert sqlite(h.db, "PRAGMA integrity_check") == "ok"


def test_sighup_log_level_takes_effect():
    # What herald logs at debug is its own choice; a reader falling behind
    # (moving to catch-up) is one such line. Make one fall behind at info
    # (nothing logged at debug), switch to debug by SIGHUP, make another fall
    # behind: now a debug line appears.
    def fall_behind(tag):
        s = Stream(h.port, rcvbuf=4096)
        s.opening()
        publish_many(h.port, [{"data": tag + "x" * 10240, "public": True} for _ in range(300)])
        return s

    h = Herald(config="log_level = info\nqueue_limit = 4096\n")
    with h:
        cpath = os.path.join(h.dir, "herald.conf")
        a = fall_behind("a")
        st, _, _ = request(h.port, "GET", "/api/health")
        assert st == 200
        assert not re.search(r"\bdebug\b", h.log()), f"debug lines at log_level info:\n{h.log()}"
        with open(cpath, "w") as f:
            f.write("log_level = debug\nqueue_limit = 4096\n")
        mark = h.log_size()
        h.signal(signal.SIGHUP)
        h.wait_log(r"reloaded", timeout=5, since=mark)
        b = fall_behind("b")
        h.wait_log(r"\bdebug\b", timeout=5, since=mark)
        a.close()
        b.close()


def test_sigterm_exits_quickly_despite_stalled_reader_and_idle_connections():
    # Drain is bounded: a reader that does not read, an idle keep-alive
    # connection and a half-sent request must not hold up the exit.
    import socket as socketmod
    from harness import HttpConn
    h = Herald(args=["--queue-limit", "65536"])
    try:
        stalled = Stream(h.port, rcvbuf=4096)
        stalled.opening()
        publish_many(h.port, [{"data": "y" * 10240, "public": True} for _ in range(300)])
        idle = HttpConn(h.port)
        assert idle.request("GET", "/api/health")[0] == 200
        half = HttpConn(h.port)
        half.send(b"GET /api/health HTTP/1.1\r\nHost: x\r\n")
        t0 = time.monotonic()
        h.signal(signal.SIGTERM)
        code = h.proc.wait(15)
        dt = time.monotonic() - t0
        assert code == 0, f"exit code {code}:\n{h.log()}"
        assert dt < 5.0, f"took {dt:.2f} s to exit with a stalled reader connected"
        for c in (idle, half):
            c.sock.settimeout(2)
            assert c.wait_closed(2), "connection still open after herald exited"
            c.close()
        stalled.sock.setsockopt(socketmod.SOL_SOCKET, socketmod.SO_RCVBUF, 1 << 20)
        assert stalled.wait_closed(5)
        stalled.close()
    finally:
        if h.proc.poll() is None:
            h.kill()
        else:
            h.logf.close()

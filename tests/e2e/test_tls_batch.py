# SPDX-License-Identifier: BSD-2-Clause
"""End-to-end: parked TLS streams in the stream rounds' io_uring submission.
A parked TLS 1.3 stream's records are sealed by herald and sent in the same
batch as plain readers' (herald_batched_tls_sends_total counts them): every
event reaches every TLS reader once and in order (OpenSSL's client, through
Python's ssl, opens every record, so a wrong key, nonce or sequence number
would be a bad record MAC); a reader with a tiny receive buffer that reads
nothing for a while gets partial sends and resumes whole; readers that
vanish in the middle of the rounds leave the others untouched; a KeyUpdate
from the client still ends a parked stream; and with io_uring off the
rounds write TLS readers one by one and deliver the same."""
import os
import re
import select
import socket
import struct
import subprocess
import tempfile
import threading
import time

from harness import Herald, Stream, publish, publish_many, request, wait_until
from test_tls import _make_cert, _s_client_read_until as _read_until, _tls_connect

OPENING = b"retry: 3000\n: stream open\n\n"


def _metric(port, name):
    st, _, body = request(port, "GET", "/metrics")
    assert st == 200
    m = re.search(rf"^{re.escape(name)} (\S+)$", body.decode(), re.M)
    assert m, f"{name} missing from /metrics"
    return float(m.group(1))


def _herald(d, config=None, args=()):
    cert, key = _make_cert(d, "a")
    h = Herald(args=["--per-address-limit", "0", "--listen", "tls:127.0.0.1:0", "--tls-cert", cert, "--tls-key", key,
                     "--log-level", "debug", *args], dir=d, config=config)
    return h, cert


def _tls_readers(h, cert, n, rcvbuf=None):
    out = [Stream(sock=_tls_connect(h.tls_port, cert, timeout=10, rcvbuf=rcvbuf), timeout=10) for _ in range(n)]
    for s in out:
        assert s.status == 200
        assert s.read_exact(len(OPENING), timeout=10) == OPENING
    # Parked on the write of their head, before any round reaches them.
    wait_until(lambda: len(re.findall(r"tls: stream from \S+ parked", h.log())) >= n, timeout=10,
               what=f"{n} parked streams")
    return out


def _events(k, size):
    return [{"type": "t", "topic": "news", "data": f"{i}-" + "x" * size, "public": True} for i in range(k)]


def _check_all(readers, ids, evs, timeout=15):
    want = [{"id": i, "event": "t", "data": e["data"]} for i, e in zip(ids, evs)]
    for n, s in enumerate(readers):
        got = s.events(len(want), timeout=timeout)
        assert got == want, f"reader {n}: got {[(e['id'], len(e['data'])) for e in got][:20]}... of {len(got)}"


def test_parked_tls_readers_are_written_in_the_batch():
    d = tempfile.mkdtemp(prefix="herald-tlsbatch-")
    h, cert = _herald(d)
    with h:
        readers = _tls_readers(h, cert, 30)
        plain = [Stream(h.port, timeout=10) for _ in range(10)]
        for s in plain:
            assert s.read_exact(len(OPENING), timeout=10) == OPENING
        try:
            evs = _events(200, 150)
            ids = publish_many(h.port, evs, window=64)
            _check_all(readers + plain, ids, evs)
            tls_sends = _metric(h.port, "herald_batched_tls_sends_total")
            assert tls_sends >= len(readers), tls_sends
            assert _metric(h.port, "herald_batched_sends_total") >= tls_sends + len(plain)
        finally:
            for s in readers + plain:
                s.close()


test_parked_tls_readers_are_written_in_the_batch.timeout = 60


def test_a_partial_send_resumes_without_a_broken_record():
    """A reader with a 4 KiB receive buffer reads nothing while 400 KB of
    events go out: its batched sends are taken in part or not at all, what
    was sealed and not taken is held and goes first when the socket has
    room, and once it reads it gets every event whole and in order (or from
    catch-up, once its queue passed the limit), like the fast readers."""
    d = tempfile.mkdtemp(prefix="herald-tlsbatch-")
    h, cert = _herald(d, args=["--queue-limit", "64k"])
    with h:
        slow = _tls_readers(h, cert, 1, rcvbuf=4096)[0]
        fast = _tls_readers(h, cert, 5)
        try:
            evs = _events(130, 3000)
            ids = publish_many(h.port, evs, window=16)
            _check_all(fast, ids, evs)
            assert _metric(h.port, "herald_batched_tls_sends_total") > 0
            _check_all([slow], ids, evs)
        finally:
            for s in fast + [slow]:
                s.close()


test_a_partial_send_resumes_without_a_broken_record.timeout = 60


def test_readers_closing_mid_round_leave_the_others_whole():
    """While events flow, some TLS readers reset their connection and some
    close it cleanly, in the middle of the rounds: herald closes them and
    every other reader gets every event once and in order."""
    d = tempfile.mkdtemp(prefix="herald-tlsbatch-")
    h, cert = _herald(d)
    with h:
        readers = _tls_readers(h, cert, 24)
        keep, gone = readers[:12], readers[12:]
        evs = _events(300, 200)
        result = {}

        def pub():
            result["ids"] = publish_many(h.port, evs, window=8)

        t = threading.Thread(target=pub)
        t.start()
        try:
            wait_until(lambda: _metric(h.port, "herald_batched_tls_sends_total") > 0, timeout=10)
            for i, s in enumerate(gone):
                if i % 2:
                    s.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                s.close()
            t.join(30)
            assert "ids" in result
            _check_all(keep, result["ids"], evs)
            wait_until(lambda: b'"readers":12,' in request(h.port, "GET", "/api/health")[2], timeout=10)
        finally:
            t.join(30)
            for s in keep:
                s.close()
        assert "write failed" not in h.log(), h.log()[-2000:]


test_readers_closing_mid_round_leave_the_others_whole.timeout = 60


def test_a_key_update_still_ends_a_parked_stream():
    """A parked stream cannot follow the client's keys: a KeyUpdate (s_client's
    `k` command) ends it, after its events went out through the batch."""
    d = tempfile.mkdtemp(prefix="herald-tlsbatch-")
    h, cert = _herald(d)
    with h:
        p = subprocess.Popen(["openssl", "s_client", "-connect", f"127.0.0.1:{h.tls_port}", "-tls1_3", "-CAfile",
                              cert],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        try:
            p.stdin.write(b"GET /api/events/stream HTTP/1.1\r\nHost: x\r\n\r\n")
            p.stdin.flush()
            os.set_blocking(p.stdout.fileno(), False)
            got = _read_until(p, b": stream open\n\n", b"")
            wait_until(lambda: "parked" in h.log(), timeout=5)
            eid = publish(h.port, data="before")
            got = _read_until(p, f"id: {eid}\nevent: message\ndata: before\n\n".encode(), got)
            assert _metric(h.port, "herald_batched_tls_sends_total") >= 1
            p.stdin.write(b"k\n")  # a KeyUpdate record, not application data
            p.stdin.flush()
            wait_until(lambda: b'"readers":0,' in request(h.port, "GET", "/api/health")[2], timeout=5,
                       what="the stream ended")
            publish(h.port, data="after")
            deadline = time.monotonic() + 5
            while p.poll() is None and time.monotonic() < deadline:
                if select.select([p.stdout], [], [], 0.1)[0]:
                    chunk = os.read(p.stdout.fileno(), 65536)
                    got += chunk
                    if not chunk:
                        break
            assert b"data: after" not in got
        finally:
            p.kill()
            p.wait()


test_a_key_update_still_ends_a_parked_stream.timeout = 30


def test_io_uring_off_writes_tls_readers_one_by_one():
    d = tempfile.mkdtemp(prefix="herald-tlsbatch-")
    h, cert = _herald(d, config="io_uring = off\n")
    with h:
        readers = _tls_readers(h, cert, 10)
        try:
            evs = _events(100, 150)
            ids = publish_many(h.port, evs, window=64)
            _check_all(readers, ids, evs)
            assert _metric(h.port, "herald_batched_tls_sends_total") == 0
            assert _metric(h.port, "herald_batched_sends_total") == 0
        finally:
            for s in readers:
                s.close()


test_io_uring_off_writes_tls_readers_one_by_one.timeout = 30

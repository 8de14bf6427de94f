# SPDX-License-Identifier: BSD-2-Clause
"""A socket passed by systemd whose name is "tls" (FileDescriptorName=tls in
the socket unit; systemd-socket-activate --fdname=tls here) serves TLS with
tls_cert/tls_key, beside a plain one in the same hand-over."""
import re
import socket
import tempfile

from harness import sqlite
from test_systemd import _activated_tcp
from test_tls import _make_cert, _tls_connect


def _read_until(sock, marker, limit=65536):
    buf = b""
    while marker not in buf and len(buf) < limit:
        d = sock.recv(4096)
        if not d:
            break
        buf += d
    return buf


def test_socket_named_tls_serves_tls_beside_a_plain_one():
    d = tempfile.mkdtemp(prefix="herald-activate-tls-")
    cert, key = _make_cert(d, "svc")
    h, (tls_port, plain_port) = _activated_tcp(2, args=["--tls-cert", cert, "--tls-key", key], fdnames="tls:plain")
    try:
        # The first connection makes systemd-socket-activate start herald.
        s = _tls_connect(tls_port, cert, timeout=15)
        s.sendall(b"GET /api/events/stream HTTP/1.1\r\nHost: x\r\n\r\n")
        head = _read_until(s, b": stream open\n\n")
        assert head.startswith(b"HTTP/1.1 200 "), head[:200]
        h.wait_log(r"herald ready")
        log = h.log()
        assert re.search(rf"listening on tls 127\.0\.0\.1:{tls_port} \(backlog \d+, from systemd\)", log), log
        assert re.search(rf"listening on tcp 127\.0\.0\.1:{plain_port} \(backlog \d+, from systemd\)", log), log
        sqlite(h.db, "INSERT INTO events(type,topic,data,public) VALUES('t','n','over tls',1)")
        assert b"data: over tls\n" in _read_until(s, b"data: over tls\n"), "event not received over TLS"
        s.close()
        # The plain socket stays plain.
        p = socket.create_connection(("127.0.0.1", plain_port), timeout=5)
        p.sendall(b"GET /api/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert _read_until(p, b"\r\n\r\n").startswith(b"HTTP/1.1 200 ")
        p.close()
        h.stop()
    finally:
        h.kill()


def test_socket_named_tls_without_a_certificate_is_refused():
    h, (port,) = _activated_tcp(1, fdnames="tls")
    try:
        # The first connection makes systemd-socket-activate start herald.
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
        h.wait_log(r"socket named tls .* tls_cert and tls_key are not set", timeout=15)
    finally:
        h.kill()

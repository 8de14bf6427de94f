# SPDX-License-Identifier: BSD-2-Clause
"""Random bytes and mutated requests from many connections at once: herald
answers each with a well-formed response or closes, never crashes (the suite
runs it under ASan and UBSan), and keeps serving readers throughout."""
import json
import random
import selectors
import socket
import time

from harness import Herald, Stream, publish, request

SEEDS = [
    b"GET /api/events/stream?topic=a,b&last_event_id=3 HTTP/1.1\r\nHost: x\r\nLast-Event-ID: 7\r\n\r\n",
    b"POST /api/events HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 46\r\n\r\n"
    b'{"type":"t","topic":"n","data":"d","public":true}',
    b"GET /api/health HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\nGET /metrics HTTP/1.0\r\n\r\n",
    b"POST /api/events HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
]
ALPHABET = b"\r\n :/?=&%,{}\"\x00\xff0123456789GETPOSTHTTP/1.1HostContent-Length"


def _mutate(rng, data):
    data = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        op = rng.randrange(5)
        pos = rng.randrange(len(data) + 1)
        if op == 0 and data:
            del data[min(pos, len(data) - 1)]
        elif op == 1:
            data[pos:pos] = bytes([rng.choice(ALPHABET)])
        elif op == 2 and data:
            data[min(pos, len(data) - 1)] = rng.randrange(256)
        elif op == 3:
            data[pos:pos] = data[rng.randrange(len(data) + 1):][: rng.randint(1, 64)]
        else:
            data = data[:pos]
    return bytes(data)


def _check_responses(raw):
    # Every response herald sent is a status line it could send, and every
    # refusal carries the one-line JSON error with the same status.
    while raw.startswith(b"HTTP/1.1 "):
        head, sep, rest = raw.partition(b"\r\n\r\n")
        assert sep, f"truncated head: {raw[:200]!r}"
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ")[1])
        hdrs = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
        if hdrs.get("content-type") == "text/event-stream":
            return
        n = int(hdrs["content-length"])
        body, raw = rest[:n], rest[n:]
        if status >= 400:
            err = json.loads(body)
            assert err["status"] == status and err["error"], (status, body)
    assert raw == b"", f"bytes that are not a response: {raw[:200]!r}"


def test_random_requests_from_many_connections():
    rng = random.Random(20261130)
    with Herald(args=["--header-timeout", "1s", "--per-address-limit", "0"]) as h:
        reader = Stream(h.port)
        reader.opening()
        sel = selectors.DefaultSelector()
        pending = {}
        for round_ in range(4):
            for _ in range(60):
                data = _mutate(rng, rng.choice(SEEDS)) if rng.random() < 0.85 else \
                    bytes(rng.randrange(256) for _ in range(rng.randint(1, 300)))
                s = socket.create_connection(("127.0.0.1", h.port), timeout=5)
                s.setblocking(False)
                s.sendall(data)
                if rng.random() < 0.5:
                    s.shutdown(socket.SHUT_WR)
                sel.register(s, selectors.EVENT_READ)
                pending[s] = b""
            # Read what comes back until each closes; streams and held-open
            # requests are cut after the header timeout has passed.
            deadline = time.monotonic() + 1.6
            while pending and time.monotonic() < deadline:
                for key, _ in sel.select(0.2):
                    s = key.fileobj
                    try:
                        d = s.recv(65536)
                    except BlockingIOError:
                        continue
                    except ConnectionResetError:
                        d = b""
                    if d:
                        pending[s] += d
                        continue
                    sel.unregister(s)
                    _check_responses(pending.pop(s))
                    s.close()
            for s, raw in list(pending.items()):
                sel.unregister(s)
                _check_responses(raw)
                s.close()
            pending.clear()
            # Still serving: health, a publish, and the reader gets it.
            assert request(h.port, "GET", "/api/health")[0] == 200
            n = publish(h.port, data=f"round-{round_}")
            got = []
            deadline = time.monotonic() + 5
            while not any(e["id"] == n for e in got) and time.monotonic() < deadline:
                got += reader.events(1, timeout=deadline - time.monotonic())
            assert any(e["id"] == n and e["data"] == f"round-{round_}" for e in got), (n, got)
        reader.close()


test_random_requests_from_many_connections.timeout = 60

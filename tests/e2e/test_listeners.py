# SPDX-License-Identifier: BSD-2-Clause
"""End-to-end: listeners. IPv4, IPv6 ([::1], when the machine has it) and a
unix socket, each logged with its backlog, each serving requests and
streams (one event reaches readers on all three); the backlog given is the
one the kernel got (ss); a warning when --backlog exceeds
net.core.somaxconn; a TCP connection is handed over once its client has
spoken (TCP_DEFER_ACCEPT)."""
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time

from harness import Herald, HttpConn, Stream, check_refusal, publish, request, wait_until


def _have_ipv6():
    try:
        s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        try:
            s.bind(("::1", 0))
            return True
        finally:
            s.close()
    except OSError:
        return False


def _somaxconn():
    try:
        with open("/proc/sys/net/core/somaxconn") as f:
            return int(f.read())
    except OSError:
        return None


def _kernel_backlog(port):
    """The accept-queue limit of the listening socket on port, as ss reports
    it (Send-Q of a LISTEN socket); None when ss is missing."""
    if not shutil.which("ss"):
        return None
    r = subprocess.run(["ss", "-Hltn", f"sport = :{port}"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=10)
    for line in r.stdout.decode().splitlines():
        f = line.split()
        if len(f) >= 4 and f[0] == "LISTEN":
            return int(f[2])
    return None


def test_ipv4_listener_logged_and_serving():
    with Herald(args=["--backlog", "77"]) as h:
        ls = h.listeners()
        assert [(k, b) for k, _, b in ls] == [("tcp", 77)], ls
        assert re.fullmatch(r"127\.0\.0\.1:\d+", ls[0][1]), ls
        assert ls[0][1] == f"127.0.0.1:{h.port}"
        st, _, body = request(h.port, "GET", "/api/health")
        assert st == 200, (st, body)
        kb = _kernel_backlog(h.port)
        assert kb is None or kb == 77, f"kernel accept queue limit {kb}, expected 77"


def test_ipv6_listener():
    if not _have_ipv6():
        print("note: ::1 is not available on this machine; IPv6 listener not tested")
        return
    with Herald(args=["--listen", "[::1]:0", "--backlog", "33"], listen=False) as h:
        ls = h.listeners()
        assert [(k, b) for k, _, b in ls] == [("tcp", 33)], ls
        assert re.fullmatch(r"\[::1\]:\d+", ls[0][1]), ls
        port = h.port_of("::1")
        st, _, body = request(port, "GET", "/api/health", host="::1")
        assert st == 200, (st, body)
        s = Stream(port, host="::1")
        assert s.status == 200
        s.opening()
        st, _, body = request(port, "POST", "/api/events", {"data": "v6", "public": True}, host="::1")
        assert st == 201, (st, body)
        got = s.events(1, timeout=5)
        assert [e["data"] for e in got] == ["v6"], got
        s.close()
        # Nothing listens on IPv4.
        assert h.port_of("127.0.0.1") is None


def test_unix_socket_listener():
    with Herald(unix=True, args=["--backlog", "55"]) as h:
        ls = h.listeners()
        assert sorted(ls) == sorted([("tcp", f"127.0.0.1:{h.port}", 55), ("unix", h.sock_path, 55)]), ls
        assert os.path.exists(h.sock_path)
        st, _, body = request(None, "GET", "/api/health", path=h.sock_path)
        assert st == 200, (st, body)
        s = Stream(path=h.sock_path)
        assert s.status == 200
        s.opening()
        st, _, body = request(None, "POST", "/api/events", {"data": "via-unix", "public": True}, path=h.sock_path)
        assert st == 201, (st, body)
        got = s.events(1, timeout=5)
        assert [e["data"] for e in got] == ["via-unix"], got
        s.close()
    # herald removes its socket file when it stops.
    assert not os.path.exists(h.sock_path), "unix socket file left behind after exit"


def test_one_event_reaches_all_three_listeners():
    six = _have_ipv6()
    args = ["--listen", "[::1]:0"] if six else []
    with Herald(unix=True, args=args) as h:
        readers = [Stream(h.port), Stream(path=h.sock_path)]
        if six:
            readers.append(Stream(h.port_of("::1"), host="::1"))
        for s in readers:
            assert s.status == 200
            s.opening()
        n = publish(h.port, data="everywhere")
        for s in readers:
            assert s.events(1, timeout=5) == [{"id": n, "event": "message", "data": "everywhere"}]
            s.close()


def test_stale_unix_socket_file_is_replaced():
    d = tempfile.mkdtemp(prefix="herald-test-")
    path = os.path.join(d, "herald.sock")
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(path)
    stale.close()  # a socket file nobody listens on, as a crash leaves behind
    with Herald(dir=d, unix=True) as h:
        assert h.sock_path == path
        st, _, _ = request(None, "GET", "/api/health", path=path)
        assert st == 200


def test_backlog_over_somaxconn_warns():
    cap = _somaxconn()
    if cap is None:
        print("note: /proc/sys/net/core/somaxconn unreadable; warning not tested")
        return
    with Herald(args=["--backlog", str(cap + 1000)]) as h:
        warn = [ln for ln in h.log().splitlines() if "somaxconn" in ln]
        assert warn, f"no somaxconn warning for --backlog {cap + 1000} > somaxconn {cap}:\n{h.log()}"
        assert str(cap) in " ".join(warn), f"the warning does not name somaxconn's value {cap}: {warn}"
        kb = _kernel_backlog(h.port)
        assert kb is None or kb == cap, f"kernel accept queue limit {kb}, expected somaxconn {cap}"
    with Herald(args=["--backlog", str(min(cap, 1024))]) as h:
        assert "somaxconn" not in h.log(), f"somaxconn warning without cause:\n{h.log()}"


def test_listen_list_from_config_file():
    d = tempfile.mkdtemp(prefix="herald-test-")
    sock = os.path.join(d, "from-file.sock")
    with Herald(dir=d, listen=False, config=f"listen = 127.0.0.1:0, unix:{sock}\nbacklog = 64\n") as h:
        ls = h.listeners()
        assert sorted(k for k, _, _ in ls) == ["tcp", "unix"], ls
        assert ("unix", sock, 64) in ls, ls
        port = h.port_of("127.0.0.1")
        assert request(port, "GET", "/api/health")[0] == 200
        assert request(None, "GET", "/api/health", path=sock)[0] == 200


def _server_side_state(port, client_port):
    """The state of herald's end of the connection from client_port to port,
    as /proc/net/tcp lists it ("01" established, "03" a half-open request
    the kernel still holds), or None when it is not listed."""
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            local, remote, state = fields[1], fields[2], fields[3]
            if int(local.split(":")[1], 16) == port and int(remote.split(":")[1], 16) == client_port:
                return state
    return None


def test_tcp_connection_is_handed_over_with_its_first_bytes():
    # TCP_DEFER_ACCEPT: a client that has said nothing stays with the kernel
    # (a half-open request, not a socket herald holds), one that speaks is
    # served at once, and the silent one is handed over after a moment and
    # judged by header_timeout as before.
    with Herald(args=["--header-timeout", "1s"]) as h:
        with HttpConn(h.port) as silent:
            cport = silent.sock.getsockname()[1]
            wait_until(lambda: _server_side_state(h.port, cport) == "03",
                       what="the silent connection held by the kernel (SYN_RECV)")
            t0 = time.monotonic()
            st, _, body = request(h.port, "GET", "/api/health")
            assert st == 200, (st, body)
            assert time.monotonic() - t0 < 0.5, "a request that came at once waited"
            silent.sock.settimeout(8)
            st, hd, body = silent.read_response()
            check_refusal(st, hd, body, 408)
            assert silent.wait_closed(3)

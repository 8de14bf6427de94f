# SPDX-License-Identifier: BSD-2-Clause
"""Running out of file descriptors at accept: herald neither spins nor dies,
says so in its log, and serves again once descriptors are free."""
import os
import re
import resource
import signal
import socket
import subprocess
import tempfile
import time

from harness import HERALD_BIN, request, wait_until

NOFILE = 48


def _cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _start(dir):
    log = open(os.path.join(dir, "herald.log"), "wb")

    def limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (NOFILE, NOFILE))

    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1")
    for k in ("NOTIFY_SOCKET", "LISTEN_FDS", "JOURNAL_STREAM"):
        env.pop(k, None)
    p = subprocess.Popen([HERALD_BIN, "--db", os.path.join(dir, "h.db"), "--listen", "127.0.0.1:0",
                          "--header-timeout", "60s"], stdout=log, stderr=log, env=env,
                         stdin=subprocess.DEVNULL, preexec_fn=limit)
    logpath = os.path.join(dir, "herald.log")

    def text():
        with open(logpath, errors="replace") as f:
            return f.read()

    wait_until(lambda: "herald ready" in text() or p.poll() is not None, 15, what="herald ready")
    m = re.search(r"listening on tcp 127\.0\.0\.1:(\d+)", text())
    assert m, text()
    return p, int(m.group(1)), text


def test_accept_survives_emfile_and_resumes():
    dir = tempfile.mkdtemp(prefix="herald-fd-")
    p, port, text = _start(dir)
    socks = []
    try:
        # More idle connections than herald has descriptors: the kernel
        # completes every handshake, herald accepts until EMFILE.
        for _ in range(NOFILE + 20):
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            socks.append(s)
        wait_until(lambda: "Too many open files" in text(), 10, what="the EMFILE log line")
        assert "pausing accepts" in text(), text()
        # Paused, not spinning: well under a tenth of a core over one second.
        c0 = _cpu_seconds(p.pid)
        time.sleep(1.0)
        used = _cpu_seconds(p.pid) - c0
        assert used < 0.1, f"herald used {used:.2f} s of CPU in 1 s while out of descriptors"
        assert p.poll() is None, "herald exited while out of descriptors"
        # The log stays quiet: at most a line a second about it.
        assert text().count("Too many open files") <= 4, text()
        for s in socks:
            s.close()
        socks = []
        # Descriptors free again: a new request is served.
        def served():
            try:
                return request(port, "GET", "/api/health", timeout=2)[0] == 200
            except OSError:
                return False
        wait_until(served, 10, what="a health answer after descriptors were freed")
    finally:
        for s in socks:
            s.close()
        p.send_signal(signal.SIGTERM)
        try:
            code = p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            raise
    assert code == 0, (code, text())

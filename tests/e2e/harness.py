"""harness.py: start real herald processes on loopback and talk to them.

Herald(args=[...]) starts $HERALD_BIN on a fresh temporary folder with its
database there, listening on 127.0.0.1 with a kernel-chosen port (and a unix
socket when unix=True), logging to DIR/herald.log; it returns once herald has
logged that it is ready. stop() sends SIGTERM and checks the exit code.
"""
import json
import os
import re
import signal
import socket
import subprocess
import tempfile
import time

HERALD_BIN = os.environ.get("HERALD_BIN", "build/herald")


class Herald:
    def __init__(self, args=(), unix=False, db=None, dir=None, env=None, config=None, wait=True,
                 listen=True, stdin=None, pass_fds=()):
        self.dir = dir or tempfile.mkdtemp(prefix="herald-test-")
        self.db = db or os.path.join(self.dir, "herald.db")
        self.sock_path = os.path.join(self.dir, "herald.sock") if unix else None
        self.logpath = os.path.join(self.dir, "herald.log")
        cmd = [HERALD_BIN, "--db", self.db]
        if config is not None:
            cpath = os.path.join(self.dir, "herald.conf")
            with open(cpath, "w") as f:
                f.write(config)
            cmd += ["--config", cpath]
        if listen:
            cmd += ["--listen", "127.0.0.1:0"]
            if unix:
                cmd += ["--listen", "unix:" + self.sock_path]
        cmd += list(args)
        self.cmd = cmd
        full_env = dict(os.environ)
        full_env.setdefault("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0")
        full_env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")
        full_env.pop("NOTIFY_SOCKET", None)
        full_env.pop("LISTEN_FDS", None)
        full_env.pop("JOURNAL_STREAM", None)
        if env:
            full_env.update(env)
        self.logf = open(self.logpath, "ab")
        self.proc = subprocess.Popen(cmd, stdout=self.logf, stderr=self.logf, env=full_env,
                                     stdin=stdin if stdin is not None else subprocess.DEVNULL,
                                     pass_fds=pass_fds)
        self.pid = self.proc.pid
        self.port = None
        if wait:
            self.wait_ready()

    def log(self):
        with open(self.logpath, "rb") as f:
            return f.read().decode(errors="replace")

    def wait_log(self, pattern, timeout=10.0):
        """Wait until the log matches the regex; return the match."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = re.search(pattern, self.log())
            if m:
                return m
            if self.proc.poll() is not None:
                raise AssertionError(f"herald exited with {self.proc.returncode} before logging {pattern!r}:\n{self.log()}")
            time.sleep(0.02)
        raise AssertionError(f"herald did not log {pattern!r} within {timeout} s:\n{self.log()}")

    def wait_ready(self, timeout=15.0):
        self.wait_log(r"herald ready", timeout)
        m = re.search(r"listening on tcp 127\.0\.0\.1:(\d+)", self.log())
        if m:
            self.port = int(m.group(1))
        return self

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def signal(self, sig):
        self.proc.send_signal(sig)

    def stop(self, timeout=10.0, expect_code=0):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"herald did not exit within {timeout} s of SIGTERM:\n{self.log()}")
        self.logf.close()
        if expect_code is not None and code != expect_code:
            raise AssertionError(f"herald exited with {code}, expected {expect_code}:\n{self.log()}")
        return code

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.logf.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            if exc[0] is None:
                self.stop()
            else:
                self.kill()


def connect(port=None, path=None, timeout=5.0):
    """A blocking socket to herald's TCP port or unix socket path."""
    if path:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        s.connect(path)
    else:
        s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    return s


def request(port, method, target, body=None, headers=None, path=None, timeout=5.0):
    """One HTTP/1.1 request on a new connection (Connection: close).
    Returns (status, headers dict with lower-case names, body bytes)."""
    headers = dict(headers or {})
    headers.setdefault("Host", "127.0.0.1")
    headers.setdefault("Connection", "close")
    if body is not None:
        if not isinstance(body, (bytes, bytearray)):
            body = json.dumps(body).encode() if not isinstance(body, str) else body.encode()
        headers.setdefault("Content-Type", "application/json")
        headers["Content-Length"] = str(len(body))
    head = f"{method} {target} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
    s = connect(port, path, timeout)
    try:
        s.sendall(head.encode() + (body or b""))
        return read_response(s)
    finally:
        s.close()


def read_response(s):
    """Read one whole response (Content-Length framed, or until close)."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = s.recv(65536)
        if not d:
            raise AssertionError(f"connection closed before a whole response head: {buf!r}")
        buf += d
    head, _, rest = buf.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    status = int(lines[0].split(" ")[1])
    hdrs = {}
    for ln in lines[1:]:
        k, _, v = ln.partition(":")
        hdrs[k.strip().lower()] = v.strip()
    if "content-length" in hdrs:
        n = int(hdrs["content-length"])
        while len(rest) < n:
            d = s.recv(65536)
            if not d:
                break
            rest += d
        return status, hdrs, rest[:n]
    while True:
        d = s.recv(65536)
        if not d:
            break
        rest += d
    return status, hdrs, rest


def publish(port, type="message", topic="news", data="hello", public=True, token=None, path=None):
    """POST /api/events; returns the new id (asserts 201)."""
    h = {"Authorization": f"Bearer {token}"} if token else {}
    st, _, body = request(port, "POST", "/api/events", {"type": type, "topic": topic, "data": data, "public": public},
                          headers=h, path=path)
    assert st == 201, f"publish got {st}: {body!r}"
    return json.loads(body)["id"]


class Stream:
    """A raw SSE reader on its own socket. events() parses frames as they come."""

    def __init__(self, port=None, query="", headers=None, path=None, timeout=5.0):
        self.sock = connect(port, path, timeout)
        headers = dict(headers or {})
        headers.setdefault("Host", "127.0.0.1")
        target = "/api/events/stream" + (("?" + query) if query else "")
        head = f"GET {target} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
        self.sock.sendall(head.encode())
        self.buf = b""
        while b"\r\n\r\n" not in self.buf:
            d = self.sock.recv(65536)
            if not d:
                raise AssertionError(f"stream closed before headers: {self.buf!r}")
            self.buf += d
        head, _, self.buf = self.buf.partition(b"\r\n\r\n")
        lines = head.decode().split("\r\n")
        self.status = int(lines[0].split(" ")[1])
        self.headers = {}
        for ln in lines[1:]:
            k, _, v = ln.partition(":")
            self.headers[k.strip().lower()] = v.strip()
        self.closed = False

    def _frame(self):
        for sep in (b"\n\n",):
            i = self.buf.find(sep)
            if i >= 0:
                raw, self.buf = self.buf[:i], self.buf[i + 2:]
                return raw
        return None

    def frames(self, timeout=5.0):
        """Yield raw frames (bytes, without the blank line) until timeout."""
        deadline = time.monotonic() + timeout
        while True:
            f = self._frame()
            if f is not None:
                yield f
                continue
            left = deadline - time.monotonic()
            if left <= 0 or self.closed:
                return
            self.sock.settimeout(left)
            try:
                d = self.sock.recv(65536)
            except socket.timeout:
                return
            if not d:
                self.closed = True
                continue
            self.buf += d

    def events(self, n=None, timeout=5.0):
        """Collect parsed events ({'id','event','data'}; comments and retry
        skipped) until n have arrived or timeout passes."""
        out = []
        if n == 0:
            return out
        for f in self.frames(timeout):
            ev = parse_frame(f)
            if ev is None:
                continue
            out.append(ev)
            if n is not None and len(out) >= n:
                break
        return out

    def close(self):
        self.sock.close()


def parse_frame(raw):
    """Parse one SSE frame; None when it carries no data (comment/retry)."""
    ev = {"id": None, "event": "message", "data": None}
    data = []
    for line in raw.decode().split("\n"):
        if line.startswith(":") or not line:
            continue
        k, _, v = line.partition(":")
        if v.startswith(" "):
            v = v[1:]
        if k == "data":
            data.append(v)
        elif k == "id":
            ev["id"] = int(v)
        elif k == "event":
            ev["event"] = v
    if not data:
        return None
    ev["data"] = "\n".join(data)
    return ev

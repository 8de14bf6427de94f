# SPDX-License-Identifier: BSD-2-Clause
"""End-to-end: a stream round's sends through io_uring (the `io_uring` key).
With it on, herald holds an io_uring and every reader, over TCP and over a
unix socket, still gets every event once and in order, including a reader
whose socket is full when the round runs, and TLS readers in the same
rounds (written one by one after the batch); with it off, or denied by a
system call filter (as a systemd unit's SystemCallFilter would deny it),
herald sends one by one and delivers the same, warning only when it was
denied."""
import ctypes
import os
import struct
import tempfile

from harness import Herald, Stream, publish
from test_tls import _make_cert, _tls_connect

OPENING = b"retry: 3000\n: stream open\n\n"
WARNING = "io_uring is not available"
IN_USE = "stream rounds send through io_uring"


def _has_io_uring(pid):
    """Whether the process holds an io_uring instance (an anon inode fd)."""
    fds = f"/proc/{pid}/fd"
    for fd in os.listdir(fds):
        try:
            if os.readlink(os.path.join(fds, fd)) == "anon_inode:[io_uring]":
                return True
        except OSError:
            pass  # closed meanwhile
    return False


def _deny_io_uring_setup():
    """preexec_fn: a seccomp filter failing io_uring_setup(2) with EPERM, as
    systemd's SystemCallFilter with SystemCallErrorNumber=EPERM does."""
    libc = ctypes.CDLL(None, use_errno=True)
    NR_IO_URING_SETUP = 425  # the same number on every architecture since 5.1
    BPF_LD_W_ABS, BPF_JEQ_K, BPF_RET_K = 0x20, 0x15, 0x06
    SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO, EPERM = 0x7FFF0000, 0x00050000, 1
    prog = [
        (BPF_LD_W_ABS, 0, 0, 0),  # seccomp_data.nr
        (BPF_JEQ_K, 0, 1, NR_IO_URING_SETUP),
        (BPF_RET_K, 0, 0, SECCOMP_RET_ERRNO | EPERM),
        (BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW),
    ]
    raw = b"".join(struct.pack("HBBI", *ins) for ins in prog)
    buf = ctypes.create_string_buffer(raw, len(raw))

    class Fprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = Fprog(len(prog), ctypes.addressof(buf))
    PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "PR_SET_NO_NEW_PRIVS")
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "PR_SET_SECCOMP")


def _fan_out(h, events=100, tcp_readers=60, unix_readers=20, tls=None):
    """Open readers over TCP and the unix socket, and one more on the unix
    socket that reads nothing until the end, publish events enough to fill
    its socket (rounds then meet it with no room: -EAGAIN from the batch),
    and check every reader got every event once and in order. tls: the
    certificate of herald's tls: listener, for ten TLS readers besides."""
    readers = [Stream(h.port, timeout=10) for _ in range(tcp_readers)]
    readers += [Stream(path=h.sock_path, timeout=10) for _ in range(unix_readers)]
    if tls:
        readers += [Stream(sock=_tls_connect(h.tls_port, tls, timeout=10), timeout=10) for _ in range(10)]
    slow = Stream(path=h.sock_path, timeout=10)
    try:
        for s in readers + [slow]:
            assert s.status == 200
            assert s.read_exact(len(OPENING), timeout=10) == OPENING
        # 3,000 bytes per event (under 4 KiB, so each goes out in a stream
        # round): 300 KB fill the slow reader's socket (about 200 KB), so
        # later rounds meet it with no room.
        data = ["%d-" % k + "x" * 3000 for k in range(events)]
        ids = [publish(h.port, type="t", topic="news", data=d) for d in data]
        want = [{"id": i, "event": "t", "data": d} for i, d in zip(ids, data)]
        for n, s in enumerate(readers):
            got = s.events(events, timeout=15)
            assert got == want, f"reader {n}: got {[(e['id'], len(e['data'])) for e in got]}"
        got = slow.events(events, timeout=15)
        assert got == want, f"the slow reader: got {[(e['id'], len(e['data'])) for e in got]}"
    finally:
        for s in readers + [slow]:
            s.close()


def test_rounds_go_through_io_uring():
    with Herald(unix=True, args=["--per-address-limit", "0"]) as h:
        assert _has_io_uring(h.pid), "herald holds no io_uring with io_uring = on"
        assert IN_USE in h.log(), h.log()
        _fan_out(h)
        assert WARNING not in h.log(), h.log()


test_rounds_go_through_io_uring.timeout = 90


def test_tls_readers_share_the_rounds():
    d = tempfile.mkdtemp(prefix="herald-uring-tls-")
    cert, key = _make_cert(d, "a")
    with Herald(unix=True, dir=d, args=["--per-address-limit", "0", "--listen", "tls:127.0.0.1:0", "--tls-cert",
                                        cert, "--tls-key", key]) as h:
        assert _has_io_uring(h.pid)
        _fan_out(h, tls=cert)


test_tls_readers_share_the_rounds.timeout = 90


def test_off_sends_one_by_one_without_a_warning():
    with Herald(unix=True, args=["--per-address-limit", "0"], config="io_uring = off\n") as h:
        assert not _has_io_uring(h.pid), "herald holds an io_uring with io_uring = off"
        _fan_out(h)
        assert WARNING not in h.log() and IN_USE not in h.log(), h.log()


test_off_sends_one_by_one_without_a_warning.timeout = 90


def test_denied_by_a_system_call_filter_warns_and_sends_one_by_one():
    with Herald(unix=True, args=["--per-address-limit", "0"], preexec_fn=_deny_io_uring_setup) as h:
        h.wait_log(WARNING + r" \(io_uring_setup: Operation not permitted\)")
        assert h.log().count(WARNING) == 1 and IN_USE not in h.log(), h.log()
        assert not _has_io_uring(h.pid)
        _fan_out(h)


test_denied_by_a_system_call_filter_warns_and_sends_one_by_one.timeout = 90

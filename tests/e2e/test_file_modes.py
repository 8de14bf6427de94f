# SPDX-License-Identifier: BSD-2-Clause
"""Permissions of what herald creates: the database (so other programs in
the service's group can insert events) and its own unix sockets."""
import os
import stat

from harness import Herald, publish


def _mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def test_new_database_is_group_writable():
    old = os.umask(0o002)
    try:
        with Herald() as h:
            publish(h.port)
            for suffix in ("", "-wal", "-shm"):
                assert _mode(h.db + suffix) == 0o660, (suffix, oct(_mode(h.db + suffix)))
    finally:
        os.umask(old)


def test_umask_still_applies_to_the_database():
    old = os.umask(0o027)
    try:
        with Herald() as h:
            publish(h.port)
            assert _mode(h.db) == 0o640, oct(_mode(h.db))
    finally:
        os.umask(old)


def test_unix_socket_mode_default_and_configured():
    with Herald(unix=True) as h:
        assert _mode(h.sock_path) == 0o660, oct(_mode(h.sock_path))
    with Herald(unix=True, args=["--unix-mode", "0666"]) as h:
        assert _mode(h.sock_path) == 0o666, oct(_mode(h.sock_path))

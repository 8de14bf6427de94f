/* transport_plain.c: plain sockets behind the transport table: the queued
 * iovecs go to writev(2) as they are, with no copy and no other system
 * call; the request is readable at accept. */
#include "transport_plain.h"

#include <errno.h>
#include <unistd.h>

static ssize_t plain_read(struct transport *t, void *buf, size_t len)
{
	ssize_t n = read(t->fd, buf, len);
	return n < 0 ? -errno : n;
}

static ssize_t plain_writev(struct transport *t, const struct iovec *iov, int n)
{
	ssize_t w = writev(t->fd, iov, n);
	return w < 0 ? -errno : w;
}

const struct transport_ops transport_plain = {
	.name = "tcp",
	.ready_at_accept = true,
	.read = plain_read,
	.writev = plain_writev,
};

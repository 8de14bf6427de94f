/* tls.c: TLS listeners. Not configured in this build yet: the functions keep
 * the seam in conn.c so plain connections never reach them. */
#include "tls.h"

#include <errno.h>

#include "conn.h"
#include "log.h"
#include "server.h"

int tls_setup(struct server *srv)
{
	if (srv->cfg.tls_cert && srv->cfg.tls_cert[0]) {
		log_err("tls_cert is set, but this build does not serve TLS yet");
		return -1;
	}
	return 0;
}

int tls_reload(struct server *srv)
{
	(void)srv;
	return 0;
}

void tls_teardown(struct server *srv)
{
	(void)srv;
}

int tls_conn_start(struct conn *c, struct listener *ls)
{
	(void)c;
	(void)ls;
	return -1;
}

void tls_conn_free(struct conn *c)
{
	c->tls = NULL;
}

bool tls_conn_handshaking(const struct conn *c)
{
	(void)c;
	return false;
}

void tls_conn_on_io(struct conn *c, uint32_t events)
{
	(void)c;
	(void)events;
}

ssize_t tls_conn_read(struct conn *c, void *buf, size_t len)
{
	(void)c;
	(void)buf;
	(void)len;
	return -EIO;
}

ssize_t tls_conn_writev(struct conn *c, const struct iovec *iov, int n)
{
	(void)c;
	(void)iov;
	(void)n;
	return -EIO;
}

uint32_t tls_conn_events(const struct conn *c, uint32_t wanted)
{
	(void)c;
	return wanted;
}

void tls_conn_shutdown(struct conn *c)
{
	(void)c;
}

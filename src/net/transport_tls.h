/* SPDX-License-Identifier: BSD-2-Clause */
/* transport_tls.h: TLS connections behind the transport table: each one's
 * non-blocking handshake, reads and writes through OpenSSL, and, once it
 * is a TLS 1.3 stream, its session parked to a key and a sequence number
 * (tls_park.h). open takes the listener's struct tls_ctx (tls_context.h). */
#ifndef HERALD_TRANSPORT_TLS_H
#define HERALD_TRANSPORT_TLS_H

#include "net/transport.h"

extern const struct transport_ops transport_tls;

#endif

/* SPDX-License-Identifier: BSD-2-Clause */
/* transport_plain.h: the transport of plain TCP and unix sockets: read(2)
 * and writev(2) straight on the socket, no state of its own. */
#ifndef HERALD_TRANSPORT_PLAIN_H
#define HERALD_TRANSPORT_PLAIN_H

#include "net/transport.h"

extern const struct transport_ops transport_plain;

#endif

/* SPDX-License-Identifier: BSD-2-Clause */
/* supervisor.h: the main process of a group of workers (workers > 1). It
 * opens the listeners (one SO_REUSEPORT socket per worker for each TCP
 * address, systemd's and unix sockets shared) and the shared region
 * (group.h), forks the workers, and supervises them: SIGTERM/SIGINT are
 * passed to every worker and it exits once they have; SIGHUP checks the
 * configuration and is passed on; a worker that dies is started again on
 * its own sockets after a short backoff. It speaks to systemd for the
 * group: READY=1 once every worker is ready, WATCHDOG=1 only while every
 * worker's loop stamps the region, STATUS= summed. */
#ifndef HERALD_SUPERVISOR_H
#define HERALD_SUPERVISOR_H

#include "core/config.h"
#include "net/listener.h"

/* Run the group for cfg (argc/argv are read again on SIGHUP). Returns in
 * two ways. In the main process, once the group has stopped: the exit
 * code, with *worker = -1 (cfg is still the caller's to free). In a
 * worker just forked: 0 with *worker its index and *mine its sockets
 * (lp, pool, m, tls to fill in, then listeners_adopt); everything else of
 * the main process is freed, and the caller serves as one process does. */
int supervisor_run(struct config *cfg, int argc, char **argv, struct listeners *mine, int *worker);

#endif

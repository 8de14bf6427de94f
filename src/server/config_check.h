/* SPDX-License-Identifier: BSD-2-Clause */
/* config_check.h: the checks the modules make of their own settings, once
 * config_load has parsed every value (config.h): listen addresses the
 * listeners can bind, a TLS pair that loads and is served, signed-token
 * keys that load. One list, run in one order, the same way at start-up,
 * by --check-config and on every reload (SIGHUP), in a single process and
 * in a group's main process. */
#ifndef HERALD_CONFIG_CHECK_H
#define HERALD_CONFIG_CHECK_H

#include <stdbool.h>

#include "core/config.h"

/* A module's check of its settings in a loaded cfg: logs each error it
 * finds (key, value and origin, as config_bad_value words them) and
 * returns how many; 0 when the module can use them. */
typedef int config_check_fn(const struct config *cfg);

/* Run every module's check, in order (listeners, TLS, signed tokens), each
 * even after another failed, so one run reports every mistake. Returns the
 * number of errors logged. */
int config_check(const struct config *cfg);

/* config_load, then config_check when it loaded: what start-up,
 * --check-config and a reload do. Returns as config_load; settings a
 * check refuses are -1 with *exit_code 1, cfg freed. */
int config_load_checked(struct config *cfg, int argc, char **argv, bool *check_only, const char **command,
			int *exit_code);

/* The TLS settings: tls_cert and tls_key set together, served by a tls:
 * listener (or a socket systemd passes), and loading as a pair
 * (tls_check_pair). Logs each error and returns how many. */
int tls_check_config(const struct config *cfg);

#endif

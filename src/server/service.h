/* SPDX-License-Identifier: BSD-2-Clause */
/* service.h: systemd integration through libsystemd: READY/STATUS/
 * RELOADING/STOPPING notifications and the watchdog, answered from a loop
 * timer so a stuck loop stops the pings and gets restarted. Every call is a
 * no-op when not run under systemd (no NOTIFY_SOCKET). */
#ifndef HERALD_SERVICE_H
#define HERALD_SERVICE_H

#include <stdbool.h>
#include <stddef.h>

#include "common/loop.h"

/* Writes the one-line STATUS= text into buf (len bytes). */
typedef void (*service_status_fn)(void *arg, char *buf, size_t len);

/* Arm the watchdog and status timers on lp (if systemd asked for them);
 * status(arg) supplies the STATUS= line every few seconds. */
void service_start(struct loop *lp, service_status_fn status, void *arg);
/* Ping the watchdog only while alive(arg) says so (the main process of a
 * group: every worker's loop stamped recently). Cleared by service_stop. */
void service_watch_alive(bool (*alive)(void *arg), void *arg);
void service_ready(void);
void service_reloading(void);
void service_stopping(void);
/* Stop the timers. */
void service_stop(void);

#endif

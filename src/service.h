/* service.h: systemd integration through libsystemd: READY/STATUS/
 * RELOADING/STOPPING notifications and the watchdog, answered from a loop
 * timer so a stuck loop stops the pings and gets restarted. Every call is a
 * no-op when not run under systemd (no NOTIFY_SOCKET). */
#ifndef HERALD_SERVICE_H
#define HERALD_SERVICE_H

struct server;

/* Arm the watchdog and status timers (if systemd asked for them). */
void service_start(struct server *srv);
void service_ready(struct server *srv);
void service_reloading(struct server *srv);
void service_stopping(struct server *srv);
void service_stop(struct server *srv);

#endif

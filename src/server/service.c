/* SPDX-License-Identifier: BSD-2-Clause */
/* service.c: sd_notify and the watchdog. One instance per process: the
 * timers and the status source are this file's. */
#include "server/service.h"

#include <stdlib.h>
#include <systemd/sd-daemon.h>
#include <time.h>

#define STATUS_EVERY_MS 5000

static struct loop *lp;
static struct loop_timer watchdog_timer, status_timer;
static uint64_t watchdog_ms;
static service_status_fn status_fn;
static void *status_arg;
static bool (*alive_fn)(void *arg);
static void *alive_arg;

static void send_status(void)
{
	if (!status_fn)
		return;
	char buf[512];
	status_fn(status_arg, buf, sizeof(buf));
	sd_notifyf(0, "STATUS=%s", buf);
}

static void watchdog_tick(void *arg)
{
	(void)arg;
	/* A group's main process vouches only for workers that show life;
	 * otherwise systemd's watchdog restarts the group. */
	if (!alive_fn || alive_fn(alive_arg))
		sd_notify(0, "WATCHDOG=1");
	loop_timer_start(lp, &watchdog_timer, watchdog_ms, watchdog_tick, NULL);
}

static void status_tick(void *arg)
{
	(void)arg;
	send_status();
	loop_timer_start(lp, &status_timer, STATUS_EVERY_MS, status_tick, NULL);
}

void service_start(struct loop *loop, service_status_fn status, void *arg)
{
	lp = loop;
	status_fn = status;
	status_arg = arg;
	uint64_t usec = 0;
	if (sd_watchdog_enabled(0, &usec) > 0 && usec > 0) {
		/* Ping at half the interval, from the loop itself. */
		watchdog_ms = usec / 2000;
		if (watchdog_ms == 0)
			watchdog_ms = 1;
		loop_timer_start(lp, &watchdog_timer, 0, watchdog_tick, NULL);
	}
	if (getenv("NOTIFY_SOCKET"))
		loop_timer_start(lp, &status_timer, STATUS_EVERY_MS, status_tick, NULL);
}

void service_watch_alive(bool (*alive)(void *arg), void *arg)
{
	alive_fn = alive;
	alive_arg = arg;
}

void service_ready(void)
{
	sd_notify(0, "READY=1");
	send_status();
}

void service_reloading(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	sd_notifyf(0, "RELOADING=1\nMONOTONIC_USEC=%llu",
		   (unsigned long long)ts.tv_sec * 1000000ULL + (unsigned long long)ts.tv_nsec / 1000ULL);
}

void service_stopping(void)
{
	sd_notify(0, "STOPPING=1");
}

void service_stop(void)
{
	alive_fn = NULL;
	alive_arg = NULL;
	if (!lp)
		return;
	loop_timer_stop(lp, &watchdog_timer);
	loop_timer_stop(lp, &status_timer);
}

/* service.c: sd_notify and the watchdog. */
#include "service.h"

#include <stdio.h>
#include <stdlib.h>
#include <systemd/sd-daemon.h>
#include <time.h>

#include "hub.h"
#include "loop.h"
#include "server.h"

#define STATUS_EVERY_MS 5000

static struct loop_timer watchdog_timer, status_timer;
static uint64_t watchdog_ms;

static void send_status(struct server *srv)
{
	/* Events read counts every writer's rows (POSTs and other programs'
	 * INSERTs); frames sent is events times the readers they reached. */
	sd_notifyf(0,
		   "STATUS=%zu readers, %zu connections, last event id %lld, %llu events read "
		   "(%llu posted), %llu frames sent",
		   hub_readers(&srv->hub), srv->nconns, (long long)srv->hub.high_water,
		   (unsigned long long)srv->m.events_read, (unsigned long long)srv->m.events_published,
		   (unsigned long long)srv->m.frames_queued);
}

static void watchdog_tick(void *arg)
{
	struct server *srv = arg;
	sd_notify(0, "WATCHDOG=1");
	loop_timer_start(srv->lp, &watchdog_timer, watchdog_ms, watchdog_tick, srv);
}

static void status_tick(void *arg)
{
	struct server *srv = arg;
	send_status(srv);
	loop_timer_start(srv->lp, &status_timer, STATUS_EVERY_MS, status_tick, srv);
}

void service_start(struct server *srv)
{
	uint64_t usec = 0;
	if (sd_watchdog_enabled(0, &usec) > 0 && usec > 0) {
		/* Ping at half the interval, from the loop itself. */
		watchdog_ms = usec / 2000;
		if (watchdog_ms == 0)
			watchdog_ms = 1;
		loop_timer_start(srv->lp, &watchdog_timer, 0, watchdog_tick, srv);
	}
	if (getenv("NOTIFY_SOCKET"))
		loop_timer_start(srv->lp, &status_timer, STATUS_EVERY_MS, status_tick, srv);
}

void service_ready(struct server *srv)
{
	sd_notify(0, "READY=1");
	send_status(srv);
}

void service_reloading(struct server *srv)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	(void)srv;
	sd_notifyf(0, "RELOADING=1\nMONOTONIC_USEC=%llu",
		   (unsigned long long)ts.tv_sec * 1000000ULL + (unsigned long long)ts.tv_nsec / 1000ULL);
}

void service_stopping(struct server *srv)
{
	(void)srv;
	sd_notify(0, "STOPPING=1");
}

void service_stop(struct server *srv)
{
	loop_timer_stop(srv->lp, &watchdog_timer);
	loop_timer_stop(srv->lp, &status_timer);
}

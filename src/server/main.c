/* SPDX-License-Identifier: BSD-2-Clause */
/* main.c: the command line, start-up, and the exit code:
 * 0 after a clean stop (or --help, --version, a good --check-config),
 * 1 when settings are invalid or start-up fails, 2 for a bad command line. */
#include <stdio.h>
#include <string.h>

#include "core/config.h"
#include "server/config_check.h"
#include "common/log.h"
#include "net/http_client.h"
#include "server/server.h"
#include "store/store_redis.h"
#include "server/supervisor.h"

/* Answer one of the commands that end the run at once (config_load found
 * it before any mistake on the command line). Returns the exit code. */
static int run_command(const char *command)
{
	if (strcmp(command, "--version") == 0) {
		printf("herald %s\n", HERALD_VERSION);
	} else if (strcmp(command, "--redis-function") == 0) {
		/* For redis-cli -x FUNCTION LOAD REPLACE, where herald itself
		 * has not connected yet. */
		fputs(store_redis_function, stdout);
	} else {
		config_usage(stdout);
	}
	return 0;
}

int main(int argc, char **argv)
{
	static struct server srv;
	bool check_only;
	const char *command;
	int code;

	/* Before the configuration, so that its errors are logged in the
	 * journal's format when stderr is the journal. Every setting is
	 * checked (values by config, addresses, certificates and keys by
	 * their modules) before anything opens. */
	log_init();
	int r = config_load_checked(&srv.cfg, argc, argv, &check_only, &command, &code);
	if (r > 0)
		return run_command(command);
	if (r < 0)
		return code;
	log_set_level((enum log_level)srv.cfg.log_level);

	if (check_only) {
		printf("configuration OK%s%s\n", srv.cfg.config_path ? ": " : "",
		       srv.cfg.config_path ? srv.cfg.config_path : " (built-in defaults)");
		config_print(&srv.cfg, stdout);
		config_free(&srv.cfg);
		return 0;
	}

	if (srv.cfg.workers > 1) {
		/* The main process supervises the group until it stops; each
		 * worker comes back here, with its sockets, and serves. */
		int worker;
		code = supervisor_run(&srv.cfg, argc, argv, &srv.listeners, &worker);
		if (worker < 0) {
			config_free(&srv.cfg);
			log_info("herald stopped");
			return code;
		}
	}
	/* libcurl's global state, once in the process that serves (a group's
	 * main process makes no requests), before any client is made; its
	 * cleanup after the last client is freed. */
	if (http_client_global_init() < 0) {
		log_err("libcurl could not be initialised");
		config_free(&srv.cfg);
		return 1;
	}
	if (server_start(&srv, argc, argv) < 0) {
		server_free(&srv);
		http_client_global_cleanup();
		return 1;
	}
	bool worker = srv.cfg.workers > 1;
	code = server_run(&srv);
	server_free(&srv);
	http_client_global_cleanup();
	if (!worker)
		log_info("herald stopped");
	return code;
}

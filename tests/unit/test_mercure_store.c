/* SPDX-License-Identifier: BSD-2-Clause */
/* test_mercure_store.c: Mercure update ids in the SQLite log
 * (src/store/store_sqlite.c, schema 5): stored with their rows in the append's
 * transaction, read back with each row (and absent from herald's own), an
 * id used again naming its earliest row, kept across a reopen, and gone
 * with their rows when retention removes them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "store/mercure_update.h"
#include "store/store_sqlite.h"

static char tmpdir[] = "/tmp/herald-mercure-store-XXXXXX";

struct seen {
	int n;
	int64_t ids[8];
	char blocks[8][64];
};

static int collect(void *arg, const struct store_event *ev)
{
	struct seen *s = arg;
	if (s->n < 8) {
		s->ids[s->n] = ev->id;
		if (ev->mercure)
			snprintf(s->blocks[s->n], sizeof(s->blocks[0]), "%.*s", (int)ev->mercure_len, ev->mercure);
		else
			strcpy(s->blocks[s->n], "-");
		s->n++;
	}
	return 0;
}

static struct store_new_event update(const char *id, const char *block)
{
	return (struct store_new_event){ .type = "message",
					 .topic = "t",
					 .data = "d",
					 .data_len = 1,
					 .public = true,
					 .mercure_id = id,
					 .mercure = block,
					 .mercure_len = block ? strlen(block) : 0 };
}

/* The ids made for keyed publishes: the same publisher, key and body
 * name the same update; any one changed, another. */
static void test_keyed_ids(void)
{
	char *a = mercure_keyed_id("sub:u", "k1", "ab"), *b = mercure_keyed_id("sub:u", "k1", "ab");
	char *c = mercure_keyed_id("sub:v", "k1", "ab"), *d = mercure_keyed_id("sub:u", "k2", "ab");
	char *e = mercure_keyed_id("sub:u", "k1", "ac"), *r = mercure_new_id();
	CHECK(strcmp(a, b) == 0 && strcmp(a, c) != 0 && strcmp(a, d) != 0 && strcmp(a, e) != 0);
	CHECK(strlen(a) == 45 && strncmp(a, "urn:uuid:", 9) == 0);
	CHECK(a[9 + 14] == '8' && strchr("89ab", a[9 + 19])); /* version 8, the RFC 9562 variant */
	CHECK(r[9 + 14] == '7' && strchr("89ab", r[9 + 19])); /* version 7: time first */
	char *later = mercure_new_id();
	CHECK(strncmp(r, later, 9 + 8) <= 0); /* the first 32 bits of the time never go back within a run */
	free(later);
	free(a);
	free(b);
	free(c);
	free(d);
	free(e);
	free(r);
}

int main(void)
{
	test_keyed_ids();
	if (!mkdtemp(tmpdir))
		return 1;
	char path[128], err[256];
	snprintf(path, sizeof(path), "%s/m.db", tmpdir);
	struct store_sqlite *st = store_sqlite_open(path, 5, err, sizeof(err));
	CHECK(st != NULL);
	struct store_new_event evs[4] = { update("urn:a", "urn:a\n\nt"), update(NULL, NULL),
					  update("urn:b", "urn:b\n10\nt\nu"), update("urn:a", "urn:a\n\nt") };
	int64_t ids[4];
	struct store_appended res[4];
	CHECK_EQ_INT(store_sqlite_append(st, evs, 4, res), 0);
	for (int i = 0; i < 4; i++)
		ids[i] = res[i].id;
	/* The id used again says which event keeps it. */
	CHECK(res[0].earlier == 0 && res[1].earlier == 0 && res[2].earlier == 0);
	CHECK_EQ_INT(res[3].earlier, ids[0]);
	int64_t found = 0;
	CHECK_EQ_INT(store_sqlite_mercure_find(st, "urn:a", &found), 1);
	CHECK_EQ_INT(found, ids[0]); /* the earliest of an id used twice */
	CHECK_EQ_INT(store_sqlite_mercure_find(st, "urn:b", &found), 1);
	CHECK_EQ_INT(found, ids[2]);
	CHECK_EQ_INT(store_sqlite_mercure_find(st, "urn:c", &found), 0);
	struct seen s = { 0 };
	CHECK_EQ_INT(store_sqlite_read_range(st, 0, ids[3], 10, collect, &s), 4);
	CHECK(strcmp(s.blocks[0], "urn:a\n\nt") == 0);
	CHECK(strcmp(s.blocks[1], "-") == 0);
	CHECK(strcmp(s.blocks[2], "urn:b\n10\nt\nu") == 0);
	store_sqlite_close(st);

	/* Across a reopen; then retention takes the first two rows and their
	 * ids with them: "urn:a" now names its later row. */
	st = store_sqlite_open(path, 5, err, sizeof(err));
	CHECK(st != NULL);
	CHECK_EQ_INT(store_sqlite_mercure_find(st, "urn:b", &found), 1);
	CHECK(store_sqlite_prune(st, 0, 2, 100) >= 2);
	CHECK_EQ_INT(store_sqlite_mercure_find(st, "urn:a", &found), 1);
	CHECK_EQ_INT(found, ids[3]);
	store_sqlite_close(st);

	char cmd[200];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	CHECK_EQ_INT(system(cmd), 0);
	return check_done("test_mercure_store");
}

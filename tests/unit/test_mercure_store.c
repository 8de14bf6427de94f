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

/* The ids made from the log and a number: read back to the number for
 * this log only; anything else of their shape is not one. */
static void test_log_ids(void)
{
	char id[MERCURE_LOG_ID_LEN + 1], other[MERCURE_LOG_ID_LEN + 1];
	int64_t n = -1;
	mercure_log_identity_set(UINT64_C(0xa1b2c3d4e5f6));
	const int64_t numbers[] = { 0, 1, 255, 1000000, INT64_C(1) << 56, (INT64_C(1) << 62) - 1, INT64_C(1) << 62,
				    INT64_MAX };
	for (size_t i = 0; i < sizeof(numbers) / sizeof(numbers[0]); i++) {
		mercure_log_id(numbers[i], id);
		CHECK(strlen(id) == MERCURE_LOG_ID_LEN && strncmp(id, "urn:uuid:a1b2c3d4-e5f6-8", 24) == 0);
		CHECK(strchr("89ab", id[9 + 19])); /* the RFC 9562 variant */
		CHECK(mercure_log_id_parse(id, strlen(id), &n) && n == numbers[i]);
	}
	mercure_log_id(42, id);
	CHECK(strcmp(id, "urn:uuid:a1b2c3d4-e5f6-8000-8000-00000000002a") == 0);
	/* Another log's, a changed version or variant, upper case, a short
	 * one, a random one: not this log's. */
	mercure_log_identity_set(UINT64_C(0xa1b2c3d4e5f7));
	mercure_log_id(42, other);
	CHECK(!mercure_log_id_parse(id, strlen(id), &n));
	mercure_log_identity_set(UINT64_C(0xa1b2c3d4e5f6));
	CHECK(mercure_log_id_parse(id, strlen(id), &n) && n == 42 && !mercure_log_id_parse(other, strlen(other), &n));
	char bad[MERCURE_LOG_ID_LEN + 1];
	strcpy(bad, id);
	bad[9 + 14] = '7';
	CHECK(!mercure_log_id_parse(bad, strlen(bad), &n));
	strcpy(bad, id);
	bad[9 + 19] = 'c';
	CHECK(!mercure_log_id_parse(bad, strlen(bad), &n));
	strcpy(bad, id);
	bad[9] = 'A';
	CHECK(!mercure_log_id_parse(bad, strlen(bad), &n));
	strcpy(bad, id);
	bad[9 + 20] = '-';
	CHECK(!mercure_log_id_parse(bad, strlen(bad), &n));
	CHECK(!mercure_log_id_parse(id, strlen(id) - 1, &n));
	strcpy(bad, id);
	bad[9 + 15] = '4'; /* the number's top bits past an int64 */
	CHECK(!mercure_log_id_parse(bad, strlen(bad), &n));
	char *r = mercure_new_id();
	CHECK(r[9 + 14] == '7' && strchr("89ab", r[9 + 19])); /* version 7: time first */
	CHECK(!mercure_log_id_parse(r, strlen(r), &n));
	char *later = mercure_new_id();
	CHECK(strncmp(r, later, 9 + 8) <= 0); /* the first 32 bits of the time never go back within a run */
	free(later);
	free(r);
}

int main(void)
{
	test_log_ids();
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

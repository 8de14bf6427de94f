/* SPDX-License-Identifier: BSD-2-Clause */
/* fuzz_json.c: fuzz target for src/common/json.c, checked against SQLite's JSON
 * functions (an in-memory database opened once), which read herald's JSON
 * before json.c did, and against a recursive-descent reference written
 * here. For every input:
 *   - json_parse's answer is the first of: not UTF-8, a NUL byte, the
 *     \u0000 scan of text.h, the reference refusing it; else JSON_OK;
 *   - the reference, told to take SQLite 3.40's one known leniency (a
 *     member name may be an array or object whose last value is a string:
 *     {["a"]:1}), answers as SQLite's json_valid does: so json.c and
 *     SQLite differ on that and nothing else;
 *   - for an accepted text, a walk of the whole tree with json_iter_next
 *     meets json_tree's rows in the same order, each with the same key
 *     (decoded, or the element's index), type, and text: a string decoded
 *     (json_string_dup), anything else as publish stores it (json_compact
 *     against json_quote of SQLite's value), and a number with the same
 *     value (json_int64, or json_double bit for bit);
 *   - json_string_is agrees with json_string_dup on each string, and
 *     json_member finds what json_extract finds for each of the top
 *     object's names (as written) and for a few fixed ones.
 * Inputs end at the driver's PROT_NONE page, so an over-read crashes.
 */
#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "common/json.h"
#include "common/text.h"

static sqlite3 *db;
static sqlite3_stmt *valid, *tree, *lookup;

static void open_db(void)
{
	if (db)
		return;
	FUZZ_ASSERT(sqlite3_open_v2(":memory:", &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_MEMORY, NULL) == SQLITE_OK);
	FUZZ_ASSERT(sqlite3_prepare_v2(db, "SELECT json_valid(?1)", -1, &valid, NULL) == SQLITE_OK);
	/* The third column is what publish.c stored for a value. */
	FUZZ_ASSERT(sqlite3_prepare_v2(db,
				       "SELECT key, type, CASE type WHEN 'true' THEN 'true' WHEN 'false' THEN 'false' "
				       "WHEN 'null' THEN 'null' WHEN 'integer' THEN json_quote(value) "
				       "WHEN 'real' THEN json_quote(value) ELSE value END, value FROM json_tree(?1)",
				       -1, &tree, NULL) == SQLITE_OK);
	FUZZ_ASSERT(sqlite3_prepare_v2(db, "SELECT json_type(?1, ?2), json_extract(?1, ?2)", -1, &lookup, NULL) ==
		    SQLITE_OK);
}

static const char *const type_names[] = { "null", "false", "true", "integer", "real", "text", "array", "object" };

static void done(sqlite3_stmt *st)
{
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
}

/* The value's text as publish stores it. */
static char *stored(const struct json_value *v, size_t *len)
{
	return v->type == JSON_STRING ? json_string_dup(v, len) : json_compact(v, len);
}

/* Compare v (with its key: a name, or the element index) with the next
 * json_tree row, then its children with the rows after. */
static void walk(const struct json_value *v, const struct json_value *name, long index)
{
	FUZZ_ASSERT(sqlite3_step(tree) == SQLITE_ROW);
	if (name) {
		size_t klen;
		char *key = json_string_dup(name, &klen);
		FUZZ_ASSERT(sqlite3_column_type(tree, 0) == SQLITE_TEXT);
		FUZZ_ASSERT((size_t)sqlite3_column_bytes(tree, 0) == klen);
		FUZZ_ASSERT(memcmp(sqlite3_column_text(tree, 0), key, klen) == 0);
		FUZZ_ASSERT(json_string_is(name, key, klen));
		free(key);
	} else if (index >= 0) {
		FUZZ_ASSERT(sqlite3_column_type(tree, 0) == SQLITE_INTEGER && sqlite3_column_int64(tree, 0) == index);
	}
	FUZZ_ASSERT(strcmp((const char *)sqlite3_column_text(tree, 1), type_names[v->type]) == 0);
	size_t len;
	char *text = stored(v, &len);
	FUZZ_ASSERT((size_t)sqlite3_column_bytes(tree, 2) == len);
	FUZZ_ASSERT(memcmp(sqlite3_column_text(tree, 2), text, len) == 0);
	if (v->type == JSON_STRING) {
		FUZZ_ASSERT(json_string_is(v, text, len));
		FUZZ_ASSERT(!len || !json_string_is(v, text, len - 1));
	}
	free(text);
	if (v->type == JSON_INTEGER || v->type == JSON_REAL) {
		int64_t i;
		bool is_int = json_int64(v, &i);
		if (sqlite3_column_type(tree, 3) == SQLITE_INTEGER) {
			FUZZ_ASSERT(is_int && i == sqlite3_column_int64(tree, 3));
		} else {
			FUZZ_ASSERT(!is_int && sqlite3_column_type(tree, 3) == SQLITE_FLOAT);
			double a = json_double(v), b = sqlite3_column_double(tree, 3);
			FUZZ_ASSERT(memcmp(&a, &b, sizeof(a)) == 0 || (a == 0 && b == 0));
		}
	}
	struct json_iter it;
	struct json_value key, child;
	long k = 0;
	json_iter_start(&it, v);
	while (json_iter_next(&it, &key, &child))
		walk(&child, v->type == JSON_OBJECT ? &key : NULL, k++);
}

/* json_member(root, name) against json_extract(text, '$."name"'). */
static void lookup_one(const char *text, size_t n, const struct json_value *root, const char *name, size_t len)
{
	if (memchr(name, '"', len))
		return; /* a path cannot hold it */
	char path[600];
	if (len + 5 > sizeof(path))
		return;
	int plen = snprintf(path, sizeof(path), "$.\"%.*s\"", (int)len, name);
	struct json_value v;
	bool found = json_member(root, name, len, &v);
	sqlite3_bind_text(lookup, 1, text, (int)n, SQLITE_STATIC);
	sqlite3_bind_text(lookup, 2, path, plen, SQLITE_STATIC);
	FUZZ_ASSERT(sqlite3_step(lookup) == SQLITE_ROW);
	const char *type = (const char *)sqlite3_column_text(lookup, 0);
	FUZZ_ASSERT(found == (type != NULL));
	if (found) {
		FUZZ_ASSERT(strcmp(type, type_names[v.type]) == 0);
		if (v.type == JSON_STRING) {
			size_t slen;
			char *s = json_string_dup(&v, &slen);
			FUZZ_ASSERT((size_t)sqlite3_column_bytes(lookup, 1) == slen);
			FUZZ_ASSERT(memcmp(sqlite3_column_text(lookup, 1), s, slen) == 0);
			free(s);
		}
	}
	done(lookup);
}

/* ---- the reference: RFC 8259 by recursive descent ---------------------- */

struct ref {
	const char *p, *end;
	bool sqlite_names; /* take a container ending in a string as a name */
	int depth;
	bool last_string; /* the last scalar read was a string */
};

static bool ref_value(struct ref *r);

static void ref_space(struct ref *r)
{
	while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r'))
		r->p++;
}

static bool ref_eat(struct ref *r, char c)
{
	ref_space(r);
	if (r->p < r->end && *r->p == c) {
		r->p++;
		return true;
	}
	return false;
}

static bool ref_string(struct ref *r)
{
	if (r->p >= r->end || *r->p != '"')
		return false;
	for (r->p++; r->p < r->end; r->p++) {
		unsigned char c = (unsigned char)*r->p;
		if (c == '"') {
			r->p++;
			r->last_string = true;
			return true;
		}
		if (c < 0x20)
			return false;
		if (c != '\\')
			continue;
		if (++r->p >= r->end)
			return false;
		c = (unsigned char)*r->p;
		if (c == 'u') {
			for (int k = 0; k < 4; k++)
				if (++r->p >= r->end || !strchr("0123456789abcdefABCDEF", *r->p) || !*r->p)
					return false;
		} else if (!c || !strchr("\"\\/bfnrt", c)) {
			return false;
		}
	}
	return false;
}

static bool ref_digits(struct ref *r)
{
	const char *start = r->p;
	while (r->p < r->end && *r->p >= '0' && *r->p <= '9')
		r->p++;
	return r->p > start;
}

static bool ref_number(struct ref *r)
{
	if (r->p < r->end && *r->p == '-')
		r->p++;
	if (r->p < r->end && *r->p == '0')
		r->p++;
	else if (r->p >= r->end || *r->p < '1' || *r->p > '9' || !ref_digits(r))
		return false;
	if (r->p < r->end && *r->p == '.' && (r->p++, !ref_digits(r)))
		return false;
	if (r->p < r->end && (*r->p == 'e' || *r->p == 'E')) {
		r->p++;
		if (r->p < r->end && (*r->p == '+' || *r->p == '-'))
			r->p++;
		if (!ref_digits(r))
			return false;
	}
	r->last_string = false;
	return true;
}

/* A list of items (values, or members) up to close, after its opener. */
static bool ref_container(struct ref *r, bool object)
{
	char close = object ? '}' : ']';
	if (++r->depth > JSON_MAX_DEPTH)
		return false;
	r->last_string = false; /* an empty one */
	if (!ref_eat(r, close)) {
		do {
			ref_space(r);
			if (object) {
				if (r->sqlite_names ? !ref_value(r) || !r->last_string : !ref_string(r))
					return false;
				if (!ref_eat(r, ':'))
					return false;
				ref_space(r);
			}
			if (!ref_value(r))
				return false;
		} while (ref_eat(r, ','));
		if (!ref_eat(r, close))
			return false;
	}
	r->depth--;
	return true;
}

static bool ref_value(struct ref *r)
{
	static const char *const words[] = { "true", "false", "null" };
	if (r->p >= r->end)
		return false;
	if (*r->p == '{' || *r->p == '[') {
		bool object = *r->p == '{';
		r->p++;
		return ref_container(r, object);
	}
	if (*r->p == '"')
		return ref_string(r);
	for (size_t i = 0; i < 3; i++) {
		size_t n = strlen(words[i]);
		if ((size_t)(r->end - r->p) >= n && memcmp(r->p, words[i], n) == 0) {
			r->p += n;
			r->last_string = false;
			return true;
		}
	}
	return ref_number(r);
}

static bool ref_valid(const char *text, size_t n, bool sqlite_names)
{
	struct ref r = { text, text + n, sqlite_names, 0, false };
	ref_space(&r);
	if (!ref_value(&r))
		return false;
	ref_space(&r);
	return r.p == r.end;
}

/* ---- json.c against SQLite ------------------------------------------- */

int fuzz_one(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data;
	struct json_value root = { JSON_NULL, NULL, 0 };
	open_db();
	int r = json_parse(text, size, &root);

	int want = JSON_OK;
	if (!text_utf8_valid(data, size))
		want = JSON_NOT_UTF8;
	else if (memchr(data, '\0', size))
		want = JSON_NUL_BYTE;
	else if (text_json_escapes_nul(text, size))
		want = JSON_NUL_ESCAPE;
	else {
		sqlite3_bind_text(valid, 1, text, (int)size, SQLITE_STATIC);
		FUZZ_ASSERT(sqlite3_step(valid) == SQLITE_ROW);
		FUZZ_ASSERT(ref_valid(text, size, true) == (sqlite3_column_int(valid, 0) == 1));
		done(valid);
		if (!ref_valid(text, size, false))
			want = JSON_NOT_JSON;
	}
	FUZZ_ASSERT(r == want);
	if (r != JSON_OK)
		return 0;
	FUZZ_ASSERT(root.p >= text && root.p + root.n <= text + size);

	sqlite3_bind_text(tree, 1, text, (int)size, SQLITE_STATIC);
	walk(&root, NULL, -1);
	FUZZ_ASSERT(sqlite3_step(tree) == SQLITE_DONE);
	done(tree);

	static const char *const fixed[] = { "exp", "nbf", "alg", "type", "data", "" };
	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
		lookup_one(text, size, &root, fixed[i], strlen(fixed[i]));
	struct json_iter it;
	struct json_value key, value;
	json_iter_start(&it, &root);
	for (int k = 0; k < 32 && root.type == JSON_OBJECT && json_iter_next(&it, &key, &value); k++)
		lookup_one(text, size, &root, key.p + 1, key.n - 2);
	return 0;
}

/* SPDX-License-Identifier: BSD-2-Clause */
/* urlpattern.c: URL patterns (see urlpattern.h for what is supported),
 * compiled per component in two steps. First to a small program: a byte,
 * any byte but the delimiter, any byte, a split into two paths, a jump,
 * the end. Then to what a match runs: the program's leading literal bytes,
 * compared as they are, and after them its positions (the instructions
 * that read a byte), each with the set of positions that may read the next
 * byte and whether the end may come next: the splits and jumps resolved
 * once, here, into 64-bit masks. A match keeps the live positions as one
 * mask and visits each once per topic byte, so it costs at most the
 * literal prefix plus (positions + 1) steps per byte: no backtracking, no
 * allocation. A pattern's width (its positions and modified groups, all
 * components together) is held to URLPATTERN_MAX_WIDTH when it is
 * compiled, which is also what lets a component's positions fit a mask. */
#include "mercure/urlpattern.h"

#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

enum comp { C_PROTOCOL, C_HOSTNAME, C_PORT, C_PATHNAME, C_SEARCH, C_HASH, C_COUNT };

enum op { OP_BYTE, OP_NOT_DELIM, OP_ANY, OP_SPLIT, OP_JMP, OP_END };

struct insn {
	uint8_t op;
	uint8_t byte;
	uint16_t x, y; /* SPLIT: both; JMP: x */
};

struct prog {
	struct insn *code;
	size_t n, cap;
	int delim;     /* OP_NOT_DELIM's byte, or -1 */
	size_t groups; /* groups with a modifier */
};

/* A position: an instruction that reads a byte (OP_BYTE, OP_NOT_DELIM
 * with the delimiter in byte, OP_ANY), the positions that may read the
 * byte after it, and whether the component may end after it. */
struct pos {
	uint8_t op, byte;
	bool fin;
	uint64_t follow;
};

/* A component as matched. */
struct part {
	bool any;  /* "*" alone: every text, nothing to run */
	bool fold; /* bytes compare lower-cased (scheme, host) */
	char *lit; /* the literal prefix, owned */
	size_t nlit;
	struct pos *pos; /* owned; npos <= URLPATTERN_MAX_WIDTH */
	size_t npos;
	uint64_t start; /* the positions live after the prefix */
	bool start_fin; /* the component may end right after the prefix */
	size_t width;   /* npos and the modified groups */
};

struct urlpattern {
	struct part part[C_COUNT];
	size_t width;
};

_Static_assert(C_COUNT == sizeof(((struct urlpattern_url *)0)->len) / sizeof(size_t),
	       "urlpattern_url holds each component");

/* Steps of every match so far (urlpattern_steps). */
static uint64_t steps_total;

/* A component's text, owned. */
struct text {
	char *s;
	size_t n;
	bool given;
};

static size_t emit(struct prog *p, uint8_t op, uint8_t byte, size_t x, size_t y)
{
	if (p->n == p->cap) {
		p->cap = p->cap ? p->cap * 2 : 32;
		p->code = xrealloc(p->code, p->cap * sizeof(*p->code));
	}
	p->code[p->n] = (struct insn){ op, byte, (uint16_t)x, (uint16_t)y };
	return p->n++;
}

static bool name_byte(unsigned char c)
{
	return isalnum(c) || c == '_' || c == '$' || c >= 0x80;
}

static bool is_modifier(char c)
{
	return c == '?' || c == '*' || c == '+';
}

/* One part: a name (one or more non-delimiter bytes) or a wildcard. */
static void emit_part(struct prog *p, bool wildcard)
{
	if (wildcard) {
		size_t l1 = emit(p, OP_SPLIT, 0, 0, 0);
		emit(p, OP_ANY, 0, 0, 0);
		emit(p, OP_JMP, 0, l1, 0);
		p->code[l1].x = (uint16_t)(l1 + 1);
		p->code[l1].y = (uint16_t)p->n;
		return;
	}
	size_t l1 = emit(p, p->delim >= 0 ? OP_NOT_DELIM : OP_ANY, (uint8_t)(p->delim >= 0 ? p->delim : 0), 0, 0);
	emit(p, OP_SPLIT, 0, l1, l1 + 2);
}

/* Wrap the code from start on (a group's body) in modifier m. The body is
 * moved up one place where a SPLIT must come first. */
static void apply_modifier(struct prog *p, size_t start, char m)
{
	if (m == '+') {
		emit(p, OP_SPLIT, 0, start, p->n + 1);
		return;
	}
	/* '?' and '*': SPLIT before the body; its jumps move up by one. */
	emit(p, OP_END, 0, 0, 0); /* room */
	memmove(p->code + start + 1, p->code + start, (p->n - 1 - start) * sizeof(*p->code));
	for (size_t i = start + 1; i < p->n; i++)
		if (p->code[i].op == OP_SPLIT || p->code[i].op == OP_JMP) {
			p->code[i].x++;
			if (p->code[i].op == OP_SPLIT)
				p->code[i].y++;
		}
	if (m == '*') {
		emit(p, OP_JMP, 0, start, 0);
	}
	p->code[start] = (struct insn){ OP_SPLIT, 0, (uint16_t)(start + 1), (uint16_t)p->n };
}

/* Compile component text s[0..n) into p. Returns NULL or a refusal. */
static const char *compile(struct prog *p, const char *s, size_t n, bool fold_case, bool slash_prefix)
{
	size_t group_start = 0;
	bool in_group = false;
	for (size_t i = 0; i < n;) {
		char c = s[i];
		if (c == '(')
			return "regular expression groups are not supported in URL patterns";
		if (c == ')')
			return "an unbalanced ')' in a URL pattern";
		if (c == '{') {
			if (in_group)
				return "a group inside a group in a URL pattern";
			in_group = true;
			group_start = p->n;
			i++;
			continue;
		}
		if (c == '}') {
			if (!in_group)
				return "an unbalanced '}' in a URL pattern";
			in_group = false;
			i++;
			if (i < n && is_modifier(s[i])) {
				apply_modifier(p, group_start, s[i++]);
				p->groups++;
			}
			continue;
		}
		if (c == ':' || c == '*') {
			size_t j = i + 1;
			if (c == ':') {
				while (j < n && name_byte((unsigned char)s[j]))
					j++;
				if (j == i + 1)
					return "a ':' without a group name in a URL pattern";
			}
			if (j < n && s[j] == '(')
				return "regular expression groups are not supported in URL patterns";
			size_t start = p->n;
			emit_part(p, c == '*');
			if (j < n && is_modifier(s[j]))
				apply_modifier(p, start, s[j++]);
			i = j;
			continue;
		}
		if (c == '/' && slash_prefix && !in_group && i + 1 < n && (s[i + 1] == ':' || s[i + 1] == '*')) {
			/* "/" then a modified name or wildcard: the "/" is inside
			 * the modifier's reach ("/books/:id?" matches "/books"). */
			size_t j = i + 2;
			if (s[i + 1] == ':')
				while (j < n && name_byte((unsigned char)s[j]))
					j++;
			if (j < n && is_modifier(s[j]) && (s[i + 1] == '*' || j > i + 2)) {
				size_t start = p->n;
				emit(p, OP_BYTE, '/', 0, 0);
				if (s[i + 1] == ':' && j < n && s[j] == '(')
					return "regular expression groups are not supported in URL patterns";
				emit_part(p, s[i + 1] == '*');
				apply_modifier(p, start, s[j]);
				i = j + 1;
				continue;
			}
		}
		if (c == '\\') {
			if (i + 1 >= n)
				return "a URL pattern ends with '\\'";
			c = s[++i];
		}
		emit(p, OP_BYTE, (uint8_t)(fold_case ? tolower((unsigned char)c) : c), 0, 0);
		i++;
	}
	if (in_group)
		return "an unclosed '{' in a URL pattern";
	emit(p, OP_END, 0, 0, 0);
	return NULL;
}

/* The positions (bits of pos_of) and whether the end are reached from pc
 * without reading a byte; seen (p->n bytes) and stack (2 * p->n + 1) are
 * the caller's scratch. */
static void closure(const struct prog *p, size_t pc, const uint8_t *pos_of, uint8_t *seen, size_t *stack,
		    uint64_t *mask, bool *fin)
{
	size_t top = 0;
	memset(seen, 0, p->n);
	*mask = 0;
	*fin = false;
	stack[top++] = pc;
	while (top) {
		size_t at = stack[--top];
		if (seen[at])
			continue;
		seen[at] = 1;
		const struct insn *in = &p->code[at];
		if (in->op == OP_JMP) {
			stack[top++] = in->x;
		} else if (in->op == OP_SPLIT) {
			stack[top++] = in->y;
			stack[top++] = in->x;
		} else if (in->op == OP_END) {
			*fin = true;
		} else {
			*mask |= UINT64_C(1) << pos_of[at];
		}
	}
}

/* The literal prefix of program p: its leading bytes up to the first
 * instruction of another kind or that a split or jump leads to. */
static size_t literal_prefix(const struct prog *p)
{
	size_t end = p->n;
	for (size_t i = 0; i < p->n; i++) {
		const struct insn *in = &p->code[i];
		if (in->op == OP_SPLIT || in->op == OP_JMP) {
			if (in->x < end)
				end = in->x;
			if (in->op == OP_SPLIT && in->y < end)
				end = in->y;
		}
	}
	size_t k = 0;
	while (k < end && p->code[k].op == OP_BYTE)
		k++;
	return k;
}

/* The literal prefix and the positions of p, into pt, and pt's width. */
static void part_measure(struct part *pt, const struct prog *p)
{
	size_t k = literal_prefix(p);
	pt->nlit = k;
	pt->lit = xmalloc(k + 1);
	for (size_t i = 0; i < k; i++)
		pt->lit[i] = (char)p->code[i].byte;
	pt->lit[k] = '\0';
	pt->npos = 0;
	for (size_t i = k; i < p->n; i++)
		if (p->code[i].op <= OP_ANY)
			pt->npos++;
	pt->width = pt->npos + p->groups;
}

/* Resolve p's splits and jumps after its prefix into pt's masks (pt
 * measured, npos <= 64). */
static void part_build(struct part *pt, const struct prog *p)
{
	uint8_t *pos_of = xcalloc(p->n, 1), *seen = xmalloc(p->n);
	size_t *stack = xmalloc((2 * p->n + 1) * sizeof(size_t));
	pt->pos = xcalloc(pt->npos ? pt->npos : 1, sizeof(*pt->pos));
	size_t q = 0;
	for (size_t i = pt->nlit; i < p->n; i++)
		if (p->code[i].op <= OP_ANY) {
			pos_of[i] = (uint8_t)q;
			pt->pos[q].op = p->code[i].op;
			pt->pos[q].byte = p->code[i].byte;
			q++;
		}
	closure(p, pt->nlit, pos_of, seen, stack, &pt->start, &pt->start_fin);
	for (size_t i = pt->nlit; i < p->n; i++)
		if (p->code[i].op <= OP_ANY) {
			struct pos *ps = &pt->pos[pos_of[i]];
			closure(p, i + 1, pos_of, seen, stack, &ps->follow, &ps->fin);
		}
	free(pos_of);
	free(seen);
	free(stack);
}

/* Whether the whole of t[0..n) is a text of pt; adds the steps taken to
 * *steps: one per prefix byte, then per byte one and one per live
 * position. */
static bool part_match(const struct part *pt, const char *t, size_t n, uint64_t *steps)
{
	if (pt->any)
		return true;
	if (n < pt->nlit)
		return false;
	for (size_t i = 0; i < pt->nlit; i++) {
		unsigned char c = (unsigned char)t[i];
		if ((pt->fold ? (unsigned char)tolower(c) : c) != (unsigned char)pt->lit[i]) {
			*steps += i + 1;
			return false;
		}
	}
	*steps += pt->nlit;
	uint64_t live = pt->start;
	bool fin = pt->start_fin;
	for (size_t i = pt->nlit; i < n; i++) {
		if (!live)
			return false;
		unsigned char c = (unsigned char)t[i];
		if (pt->fold)
			c = (unsigned char)tolower(c);
		uint64_t next = 0;
		fin = false;
		*steps += 1 + (uint64_t)__builtin_popcountll(live);
		for (uint64_t m = live; m; m &= m - 1) {
			const struct pos *ps = &pt->pos[__builtin_ctzll(m)];
			bool take = ps->op == OP_ANY || (ps->op == OP_BYTE ? ps->byte == c : ps->byte != c);
			if (take) {
				next |= ps->follow;
				fin |= ps->fin;
			}
		}
		live = next;
	}
	return fin;
}

/* The first of the bytes in set at s[from..n) outside escapes and groups
 * (a pattern's); a '?' right after a name, a wildcard or a group is a
 * modifier, not the search's start. n when none. */
static size_t find_top(const char *s, size_t n, size_t from, const char *set, bool pattern)
{
	bool in_group = false, in_name = false, modifiable = false;
	for (size_t i = from; i < n; i++) {
		char c = s[i];
		if (!pattern) {
			if (strchr(set, c))
				return i;
			continue;
		}
		if (c == '\\') {
			i++;
			in_name = modifiable = false;
			continue;
		}
		if (c == '?' && (in_name || modifiable)) {
			in_name = modifiable = false;
			continue;
		}
		if (in_name && name_byte((unsigned char)c))
			continue;
		in_name = c == ':';
		modifiable = c == '*' || c == '}';
		if (c == '{')
			in_group = true;
		else if (c == '}')
			in_group = false;
		else if (!in_group && strchr(set, c))
			return i;
	}
	return n;
}

static void text_set(struct text *t, const char *s, size_t n)
{
	free(t->s);
	t->s = xstrndup(s, n);
	t->n = n;
	t->given = true;
}

/* s[0..n) with the pattern syntax's bytes escaped, appended at t. */
static void text_append_literal(struct text *t, const char *s, size_t n, bool escape)
{
	char *out = xmalloc(t->n + 2 * n + 1);
	memcpy(out, t->s ? t->s : "", t->n);
	size_t k = t->n;
	for (size_t i = 0; i < n; i++) {
		if (escape && strchr(":*{}()?+\\", s[i]))
			out[k++] = '\\';
		out[k++] = s[i];
	}
	out[k] = '\0';
	free(t->s);
	t->s = out;
	t->n = k;
	t->given = true;
}

static void texts_free(struct text *t)
{
	for (int i = 0; i < C_COUNT; i++)
		free(t[i].s);
}

/* Whether s[0..n) starts with "scheme://" (a pattern's scheme may hold
 * '*'); the scheme's length in *len. */
static bool has_scheme(const char *s, size_t n, size_t *len)
{
	size_t i = 0;
	while (i < n && (isalnum((unsigned char)s[i]) || s[i] == '+' || s[i] == '-' || s[i] == '.' || s[i] == '*'))
		i++;
	if (i == 0 || i + 3 > n || memcmp(s + i, "://", 3) != 0 || isdigit((unsigned char)s[0]))
		return false;
	*len = i;
	return true;
}

/* Split URL (or pattern) s[0..n) into components, resolving a relative
 * one against the absolute URL base (taken as literal text). */
static void split(const char *s, size_t n, const char *base, bool pattern, struct text *out)
{
	size_t scheme_len;
	memset(out, 0, C_COUNT * sizeof(*out));
	size_t at;
	if (has_scheme(s, n, &scheme_len)) {
		text_set(&out[C_PROTOCOL], s, scheme_len);
		size_t a = scheme_len + 3;
		size_t end = find_top(s, n, a, "/?#", pattern);
		size_t colon = end;
		for (size_t i = end; i > a; i--)
			if (s[i - 1] == ':') {
				colon = i - 1;
				break;
			}
		bool port = colon < end;
		for (size_t i = colon + 1; port && i < end; i++)
			port = isdigit((unsigned char)s[i]) || s[i] == '*';
		text_set(&out[C_HOSTNAME], s + a, (port ? colon : end) - a);
		text_set(&out[C_PORT], port ? s + colon + 1 : "", port ? end - colon - 1 : 0);
		at = end;
		size_t pend = find_top(s, n, at, "?#", pattern);
		if (pend > at)
			text_set(&out[C_PATHNAME], s + at, pend - at);
		else
			text_set(&out[C_PATHNAME], "/", 1);
		at = pend;
	} else {
		/* Relative: the base's scheme, host and port, literal. */
		struct text b[C_COUNT];
		size_t blen;
		if (base && has_scheme(base, strlen(base), &blen))
			split(base, strlen(base), "", false, b);
		else
			memset(b, 0, sizeof(b));
		for (int i = C_PROTOCOL; i <= C_PORT; i++) {
			out[i].n = 0;
			text_append_literal(&out[i], b[i].s ? b[i].s : "", b[i].n, pattern);
		}
		size_t pend = find_top(s, n, 0, "?#", pattern);
		if (pend == 0 || s[0] != '/') {
			/* A path relative to the base's folder. */
			const char *bp = b[C_PATHNAME].s ? b[C_PATHNAME].s : "/";
			const char *slash = strrchr(bp, '/');
			size_t keep = slash ? (size_t)(slash - bp) + 1 : 0;
			text_append_literal(&out[C_PATHNAME], bp, keep, pattern);
		}
		char *path = xstrndup(s, pend);
		size_t old = out[C_PATHNAME].n;
		char *joined = xmalloc(old + pend + 1);
		memcpy(joined, out[C_PATHNAME].s ? out[C_PATHNAME].s : "", old);
		memcpy(joined + old, path, pend);
		joined[old + pend] = '\0';
		free(path);
		free(out[C_PATHNAME].s);
		out[C_PATHNAME].s = joined;
		out[C_PATHNAME].n = old + pend;
		out[C_PATHNAME].given = true;
		texts_free(b);
		at = pend;
	}
	if (at < n && s[at] == '?') {
		size_t hend = find_top(s, n, at + 1, "#", pattern);
		text_set(&out[C_SEARCH], s + at + 1, hend - at - 1);
		at = hend;
	}
	if (at < n && s[at] == '#')
		text_set(&out[C_HASH], s + at + 1, n - at - 1);
	/* The URL parser's canonical forms that matter here: lower-case
	 * scheme (and host, folded when matched), no default port. */
	for (size_t i = 0; i < out[C_PROTOCOL].n; i++)
		out[C_PROTOCOL].s[i] = (char)tolower((unsigned char)out[C_PROTOCOL].s[i]);
	const char *scheme = out[C_PROTOCOL].s ? out[C_PROTOCOL].s : "";
	const char *port = out[C_PORT].s ? out[C_PORT].s : "";
	if (((!strcmp(scheme, "http") || !strcmp(scheme, "ws")) && !strcmp(port, "80")) ||
	    ((!strcmp(scheme, "https") || !strcmp(scheme, "wss")) && !strcmp(port, "443")))
		text_set(&out[C_PORT], "", 0);
}

struct urlpattern *urlpattern_new(const char *pattern, size_t n, const char *base, const char **why)
{
	if (n > URLPATTERN_MAX_LEN) {
		*why = "a URL pattern longer than 1024 bytes";
		return NULL;
	}
	struct text t[C_COUNT];
	split(pattern, n, base, true, t);
	struct urlpattern *p = xcalloc(1, sizeof(*p));
	struct prog prog[C_COUNT];
	memset(prog, 0, sizeof(prog));
	*why = NULL;
	for (int i = 0; i < C_COUNT && !*why; i++) {
		struct part *pt = &p->part[i];
		/* Left out (search and hash when the pattern stops before
		 * them), or "*" alone: anything, at no cost. */
		pt->any = !t[i].given || (t[i].n == 1 && t[i].s[0] == '*');
		pt->fold = i == C_PROTOCOL || i == C_HOSTNAME;
		if (pt->any)
			continue;
		prog[i].delim = i == C_PATHNAME ? '/' : i == C_HOSTNAME ? '.' : -1;
		*why = compile(&prog[i], t[i].s, t[i].n, pt->fold, i == C_PATHNAME);
		if (!*why && prog[i].n > UINT16_MAX - 4)
			*why = "a URL pattern too large to compile";
		if (!*why) {
			part_measure(pt, &prog[i]);
			p->width += pt->width;
		}
	}
	if (!*why && p->width > URLPATTERN_MAX_WIDTH)
		*why = "a URL pattern wider than 64 (its :names, *s and modified {groups}, and the bytes after the "
		       "first of them, counted over its parts)";
	for (int i = 0; i < C_COUNT; i++) {
		if (!*why && !p->part[i].any)
			part_build(&p->part[i], &prog[i]);
		free(prog[i].code);
	}
	texts_free(t);
	if (*why) {
		urlpattern_free(p);
		return NULL;
	}
	return p;
}

void urlpattern_free(struct urlpattern *p)
{
	if (!p)
		return;
	for (int i = 0; i < C_COUNT; i++) {
		free(p->part[i].lit);
		free(p->part[i].pos);
	}
	free(p);
}

size_t urlpattern_width(const struct urlpattern *p)
{
	return p->width;
}

const char *urlpattern_path_prefix(const struct urlpattern *p, size_t *len)
{
	const struct part *pt = &p->part[C_PATHNAME];
	*len = pt->any ? 0 : pt->nlit;
	return pt->any ? "" : pt->lit;
}

void urlpattern_url_parse(struct urlpattern_url *u, const char *topic, size_t n, const char *base)
{
	memset(u, 0, sizeof(*u));
	if (n > URLPATTERN_TOPIC_MAX) {
		u->too_long = true;
		return;
	}
	struct text t[C_COUNT];
	split(topic, n, base, false, t);
	for (int i = 0; i < C_COUNT; i++) {
		u->text[i] = t[i].s;
		u->len[i] = t[i].n;
	}
}

void urlpattern_url_free(struct urlpattern_url *u)
{
	for (int i = 0; i < C_COUNT; i++)
		free(u->text[i]);
	memset(u, 0, sizeof(*u));
}

const char *urlpattern_url_path(const struct urlpattern_url *u, size_t *len)
{
	*len = u->len[C_PATHNAME];
	return u->text[C_PATHNAME] ? u->text[C_PATHNAME] : "";
}

bool urlpattern_match_url(const struct urlpattern *p, const struct urlpattern_url *u)
{
	if (u->too_long)
		return false;
	uint64_t steps = 0;
	bool ok = true;
	for (int i = 0; i < C_COUNT && ok; i++)
		ok = part_match(&p->part[i], u->text[i] ? u->text[i] : "", u->len[i], &steps);
	steps_total += steps;
	return ok;
}

bool urlpattern_match(const struct urlpattern *p, const char *topic, size_t n, const char *base)
{
	struct urlpattern_url u;
	urlpattern_url_parse(&u, topic, n, base);
	bool ok = urlpattern_match_url(p, &u);
	urlpattern_url_free(&u);
	return ok;
}

char *urlpattern_topic_path(const char *topic, size_t n, const char *base)
{
	struct text t[C_COUNT];
	split(topic, n, base, false, t);
	char *path = xstrndup(t[C_PATHNAME].s ? t[C_PATHNAME].s : "", t[C_PATHNAME].n);
	texts_free(t);
	return path;
}

uint64_t urlpattern_steps(void)
{
	return steps_total;
}

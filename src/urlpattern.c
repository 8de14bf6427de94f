/* urlpattern.c: URL patterns compiled to one small program per component
 * and run as a Thompson simulation (see urlpattern.h for what is
 * supported). A program is a list of instructions: a byte, any byte but
 * the delimiter, any byte, a split into two paths, a jump, the end. The
 * simulation keeps the set of live instructions per topic byte, each at
 * most once, so no input makes it backtrack. */
#include "urlpattern.h"

#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

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
	int delim; /* OP_NOT_DELIM's byte, or -1 */
};

struct urlpattern {
	struct prog comp[C_COUNT];
};

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
			if (i < n && is_modifier(s[i]))
				apply_modifier(p, group_start, s[i++]);
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

/* Add pc and what it leads to without reading a byte to the set. */
static void add_thread(const struct prog *p, size_t pc, size_t *list, size_t *count, uint8_t *on, size_t *stack)
{
	size_t top = 0;
	stack[top++] = pc;
	while (top) {
		size_t at = stack[--top];
		if (on[at])
			continue;
		on[at] = 1;
		const struct insn *in = &p->code[at];
		if (in->op == OP_JMP) {
			stack[top++] = in->x;
		} else if (in->op == OP_SPLIT) {
			stack[top++] = in->y;
			stack[top++] = in->x;
		} else {
			list[(*count)++] = at;
		}
	}
}

/* Whether the whole of t[0..n) runs p to its end. */
static bool run(const struct prog *p, const char *t, size_t n, bool fold_case)
{
	size_t m = p->n;
	size_t *cur = xmalloc(m * sizeof(size_t)), *next = xmalloc(m * sizeof(size_t));
	size_t *stack = xmalloc(2 * m * sizeof(size_t) + sizeof(size_t));
	uint8_t *on = xcalloc(m, 1);
	size_t ncur = 0, nnext = 0;
	add_thread(p, 0, cur, &ncur, on, stack);
	for (size_t i = 0; i < n && ncur; i++) {
		unsigned char c = (unsigned char)t[i];
		if (fold_case)
			c = (unsigned char)tolower(c);
		memset(on, 0, m);
		nnext = 0;
		for (size_t k = 0; k < ncur; k++) {
			const struct insn *in = &p->code[cur[k]];
			bool take = (in->op == OP_BYTE && in->byte == c) || in->op == OP_ANY ||
				    (in->op == OP_NOT_DELIM && c != in->byte);
			if (take)
				add_thread(p, cur[k] + 1, next, &nnext, on, stack);
		}
		size_t *swap = cur;
		cur = next;
		next = swap;
		ncur = nnext;
	}
	bool matched = false;
	for (size_t k = 0; k < ncur && !matched; k++)
		matched = p->code[cur[k]].op == OP_END;
	free(cur);
	free(next);
	free(stack);
	free(on);
	return matched;
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
	*why = NULL;
	for (int i = 0; i < C_COUNT && !*why; i++) {
		p->comp[i].delim = i == C_PATHNAME ? '/' : i == C_HOSTNAME ? '.' : -1;
		/* Left out (search and hash when the pattern stops before
		 * them): anything. */
		const char *text = t[i].given ? t[i].s : "*";
		size_t len = t[i].given ? t[i].n : 1;
		*why = compile(&p->comp[i], text, len, i == C_PROTOCOL || i == C_HOSTNAME, i == C_PATHNAME);
		if (!*why && p->comp[i].n > UINT16_MAX - 4)
			*why = "a URL pattern too large to compile";
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
	for (int i = 0; i < C_COUNT; i++)
		free(p->comp[i].code);
	free(p);
}

bool urlpattern_match(const struct urlpattern *p, const char *topic, size_t n, const char *base)
{
	if (n > URLPATTERN_TOPIC_MAX)
		return false;
	struct text t[C_COUNT];
	split(topic, n, base, false, t);
	bool ok = true;
	for (int i = 0; i < C_COUNT && ok; i++)
		ok = run(&p->comp[i], t[i].s ? t[i].s : "", t[i].n, i == C_PROTOCOL || i == C_HOSTNAME);
	texts_free(t);
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

/* SPDX-License-Identifier: BSD-2-Clause */
/* tool-tls.c: what the TLS load tools share: a throwaway self-signed
 * certificate for the herald they start, and the port of that herald's tls:
 * listener read from its log. The client side (contexts, sessions, I/O) is
 * each tool's own. */
#include "tool.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

int tool_tls_make_cert(struct tool_cert *c, char *err, size_t errlen)
{
	const char *tmp = getenv("TMPDIR");
	snprintf(c->dir, sizeof(c->dir), "%s/%s-tls-XXXXXX", tmp && *tmp ? tmp : "/tmp", tool_name());
	if (!mkdtemp(c->dir)) {
		snprintf(err, errlen, "mkdtemp %s: %s", c->dir, strerror(errno));
		c->dir[0] = '\0';
		return -1;
	}
	snprintf(c->cert, sizeof(c->cert), "%s/cert.pem", c->dir);
	snprintf(c->key, sizeof(c->key), "%s/key.pem", c->dir);
	int ok = 0;
	EVP_PKEY *pk = EVP_EC_gen("P-256");
	X509 *x = X509_new();
	X509_EXTENSION *san = NULL;
	FILE *fc = NULL, *fk = NULL;
	if (!pk || !x)
		goto done;
	X509_set_version(x, 2);
	ASN1_INTEGER_set(X509_get_serialNumber(x), (long)(time(NULL) & 0x7fffffff));
	X509_gmtime_adj(X509_getm_notBefore(x), -60);
	X509_gmtime_adj(X509_getm_notAfter(x), 86400);
	X509_set_pubkey(x, pk);
	X509_NAME *name = X509_get_subject_name(x);
	X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)"herald-load", -1, -1, 0);
	X509_set_issuer_name(x, name);
	X509V3_CTX v3;
	X509V3_set_ctx_nodb(&v3);
	X509V3_set_ctx(&v3, x, x, NULL, NULL, 0);
	san = X509V3_EXT_conf_nid(NULL, &v3, NID_subject_alt_name, "IP:127.0.0.1");
	if (!san || X509_add_ext(x, san, -1) != 1 || X509_sign(x, pk, EVP_sha256()) <= 0)
		goto done;
	fc = fopen(c->cert, "w");
	fk = fopen(c->key, "w");
	ok = fc && fk && PEM_write_X509(fc, x) == 1 && PEM_write_PrivateKey(fk, pk, NULL, NULL, 0, NULL, NULL) == 1;
done:
	if (fc && fclose(fc) != 0)
		ok = 0;
	if (fk && fclose(fk) != 0)
		ok = 0;
	X509_EXTENSION_free(san);
	X509_free(x);
	EVP_PKEY_free(pk);
	if (ok)
		return 0;
	unsigned long e = ERR_peek_last_error();
	char why[160];
	if (e)
		ERR_error_string_n(e, why, sizeof(why));
	else
		snprintf(why, sizeof(why), "%s", errno ? strerror(errno) : "unknown error");
	ERR_clear_error();
	snprintf(err, errlen, "cannot make a certificate in %s: %s", c->dir, why);
	return -1;
}

void tool_tls_remove_cert(struct tool_cert *c, int keep)
{
	if (!c->dir[0] || keep)
		return;
	unlink(c->cert);
	unlink(c->key);
	rmdir(c->dir);
	c->dir[0] = '\0';
}

int tool_tls_port_from_log(const char *log)
{
	static const char mark[] = "listening on tls 127.0.0.1:";
	FILE *f = fopen(log, "r");
	char line[512];
	int port = 0;
	while (f && !port && fgets(line, sizeof(line), f)) {
		char *p = strstr(line, mark);
		if (p)
			port = atoi(p + strlen(mark));
	}
	if (f)
		fclose(f);
	return port;
}

void tool_tls_note_error(char *first, size_t len, const char *what)
{
	if (!first[0]) {
		unsigned long e = ERR_peek_last_error();
		char buf[160];
		if (e)
			ERR_error_string_n(e, buf, sizeof(buf));
		else
			snprintf(buf, sizeof(buf), "%s", errno ? strerror(errno) : "connection closed");
		snprintf(first, len, "%s: %s", what, buf);
	}
	ERR_clear_error();
}

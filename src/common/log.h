/* SPDX-License-Identifier: BSD-2-Clause */
/* log.h: leveled logging to stderr. With JOURNAL_STREAM matching stderr the
 * lines carry journald priority prefixes ("<6>"); otherwise each line starts
 * with an ISO-8601 timestamp and the level name. */
#ifndef HERALD_LOG_H
#define HERALD_LOG_H

enum log_level { LOG_LVL_ERR = 3, LOG_LVL_WARN = 4, LOG_LVL_NOTICE = 5, LOG_LVL_INFO = 6, LOG_LVL_DEBUG = 7 };

/* Decide the output format (journal or plain) from the environment. */
void log_init(void);
void log_set_level(enum log_level lvl);
/* The name of a level ("warning"), as log_level_parse reads it. */
const char *log_level_name(int lvl);
/* Parse "error", "warning", "notice", "info", "debug"; returns -1 if unknown. */
int log_level_parse(const char *s);

void log_msg(enum log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_err(...) log_msg(LOG_LVL_ERR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_LVL_WARN, __VA_ARGS__)
#define log_notice(...) log_msg(LOG_LVL_NOTICE, __VA_ARGS__)
#define log_info(...) log_msg(LOG_LVL_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_LVL_DEBUG, __VA_ARGS__)

#endif

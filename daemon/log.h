/*
 * log.h - log lines to stderr (text or JSON, or the journal's fields).
 */
#ifndef TD_LOG_H
#define TD_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum { TD_LOG_ERR, TD_LOG_WARN, TD_LOG_INFO, TD_LOG_DEBUG };
void td_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A line about a batch (call NULL) or one of its calls. */
void td_logc(int level, const char *batch, const char *call, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* --log-format text|json; also detects the journal. -1 on a bad format. */
int td_log_setup(const char *format);
int td_log_level_parse(const char *s);
/* Lines above this level are not written (--log-level; TD_LOG_INFO). */
void td_log_set_level(int level);

#endif

/*
 * log.h - log lines to stderr (text or JSON, or the journal's fields).
 */
#ifndef TD_LOG_H
#define TD_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

enum { TD_LOG_ERR, TD_LOG_WARN, TD_LOG_INFO, TD_LOG_DEBUG };
void td_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A line about a batch (call NULL) or one of its calls. */
void td_logc(int level, const char *batch, const char *call, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* A line with fields: in JSON the fields are members of the line's
 * object, in the journal TOOLEXECD_<FIELD> fields, in text " key=value"
 * after the message (a string as itself, other values as compact JSON). */
void td_log_record(int level, const char *batch, const char *call, const json_t *fields,
                   const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* Whether a line at this level is written (to skip building one). */
bool td_log_enabled(int level);
/* Whether lines are structured (--log-format json, or the journal). */
bool td_log_structured(void);
/* --log-format text|json; also detects the journal. -1 on a bad format. */
int td_log_setup(const char *format);
int td_log_level_parse(const char *s);
/* Lines above this level are not written (--log-level; TD_LOG_INFO). */
void td_log_set_level(int level);

#endif

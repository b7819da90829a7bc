/*
 * audit.h - the audit trail: one record per finished call (audit.c).
 */
#ifndef TD_AUDIT_H
#define TD_AUDIT_H

#include <stdbool.h>

/* Subscribes to the event bus; with_arguments: records carry the call's
 * arguments too (--audit-arguments), not only their digest. */
void td_audit_init(bool with_arguments);

#endif

/*
 * defcheck.h - toolexecd --check --tools DIR.
 */
#ifndef TD_DEFCHECK_H
#define TD_DEFCHECK_H

#include <stdio.h>

/* Print every problem of every definition in dir to out, one line each,
 * then a summary line. 0 when there is none, 1 otherwise. */
int td_defcheck(const char *dir, FILE *out);

#endif

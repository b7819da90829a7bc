/* usage.h - toolexecd --help (usage.c). */
#ifndef TD_USAGE_H
#define TD_USAGE_H

#include <stdio.h>

void td_usage(FILE *f);

#endif

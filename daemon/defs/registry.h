/*
 * registry.h - the tool definitions (one JSON file per tool in tools.d).
 */
#ifndef TD_REGISTRY_H
#define TD_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>

#include <jansson.h>

#include "tool.h"

int td_registry_load(const char *dir, struct td_registry **out, char *err, size_t errlen);
struct td_tool *td_registry_find(const struct td_registry *r, const char *name);
json_t *td_registry_list(const struct td_registry *r);
/* The tools as "openai", "openai_responses", "anthropic" or "mcp" declare
 * them; NULL for another format. */
json_t *td_registry_list_as(const struct td_registry *r, const char *format);
void td_registry_free(struct td_registry *r);
struct td_tool *td_tool_ref(struct td_tool *t);
void td_tool_unref(struct td_tool *t);
extern struct td_registry *td_tools;

/* The loader's steps one by one, for defcheck.c (every problem
 * in every file, not the first). */
struct stat;
int td_registry_list_defs(int dfd, char ***out);
int td_registry_read_def(int dfd, const char *name, char **text, size_t *len, struct stat *st,
                         char *why, size_t whylen);
int td_registry_parse_def(const char *dir, const char *file, json_t *def, struct td_tool **out,
                          char *err, size_t errlen);

#endif

/*
 * declare.h - a tool as the LLM APIs and MCP are told of it (declare.c).
 */
#ifndef TD_DECLARE_H
#define TD_DECLARE_H

#include <stdarg.h>
#include <stddef.h>

#include <jansson.h>

struct td_tool;
struct td_registry;

/* Parse the definition keys title, annotations, output_schema, strict and scopes,
 * and derive the listed schema and the API name; after t->name and
 * t->schema are set. -EINVAL with err naming file, key and pointer. */
int td_declare_parse(const char *file, const json_t *def, struct td_tool *t, char *err,
                     size_t errlen);
void td_declare_free(struct td_tool *t);
/* Refuse a registry in which two tools would be declared under one name. */
int td_declare_check_names(const struct td_registry *r, char *err, size_t errlen);
/* The tool as format ("openai", "openai_responses", "anthropic", "mcp")
 * declares it; NULL for another format. */
json_t *td_declare_tool(const struct td_tool *t, const char *format);
/* result (stolen) of a call of t, or (when it is ok and does not match the
 * tool's output_schema) the invalid_return tool error that replaces it. */
json_t *td_declare_check_output(const struct td_tool *t, const char *call_id, json_t *result);

#endif

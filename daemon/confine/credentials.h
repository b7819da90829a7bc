/*
 * credentials.h - "network": {"headers": {"HOST[:PORT]": {"Name":
 * {"credential": "NAME"}}}}: headers the call's egress proxy adds to what
 * a call sends to a host (proxy_request.c for plain HTTP, proxy_tls.c for
 * HTTPS), their values read from root-only files in the credentials
 * directory (--credentials-dir), never from the definition, never shown to
 * the call.
 */
#ifndef TD_CREDENTIALS_H
#define TD_CREDENTIALS_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#define TD_CREDENTIAL_MAX 8192 /* bytes in a credential file */

/* --credentials-dir; NULL: $CREDENTIALS_DIRECTORY, else the default. */
extern const char *td_credentials_dir;
#define TD_CREDENTIALS_DEFAULT "/etc/toolexecd/credentials"
/* The directory in effect (hidden in every call's view, fsview.c). */
const char *td_credentials_path(void);

struct td_cred_header {
    char *name, *value; /* value: the header's whole value */
};
struct td_cred_host {
    char *host; /* lower case; an IPv6 address in inet_ntop's form */
    int port;   /* 0: 80 and 443, as in the allow-list */
    struct td_cred_header *h;
    size_t n;
};
struct td_creds {
    struct td_cred_host *hosts;
    size_t n;
};

/* The "headers" object; every credential read (and its file checked) now.
 * 0, or -1 with why in err. */
int td_creds_parse(json_t *v, struct td_creds **out, char *err, size_t errlen);
/* Values wiped, then freed. NULL is a no-op. */
void td_creds_free(struct td_creds *c);
/* The headers for host (lower case, no trailing dot) port; NULL: none. */
const struct td_cred_host *td_creds_find(const struct td_creds *c, const char *host, unsigned port);
/* Is name one of h's headers (any case)? */
bool td_creds_names(const struct td_cred_host *h, const char *name, size_t len);
/* One credential: dir/name, a regular file owned by root or this uid and
 * not readable or writable by group or others, its one trailing newline
 * stripped, no CR, LF or NUL left in it. 0 with *value (malloc'd), or -1
 * with why in err. */
int td_credential_read(const char *dir, const char *name, char **value, char *err, size_t errlen);

#endif

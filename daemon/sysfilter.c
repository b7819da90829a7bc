/*
 * sysfilter.c - system-call filters for workers.
 *
 * "network": false puts a call in a network namespace of its own, which cuts
 * every interface and the abstract Unix socket namespace, but not Unix
 * sockets in the file system: they are reached by path, as files. Without a
 * file-system view of its own (a minimal root per call), the one way to keep
 * such a call from the host's sockets (a database's, Docker's, the
 * session bus) is to refuse the socket itself: socket(AF_UNIX) fails with
 * EACCES. socketpair() stays allowed (a pipe with two ends; it reaches
 * nothing).
 *
 * The filter is built here once with libseccomp and exported as classic
 * BPF, because the worker's set-up runs in a vfork child that shares our
 * memory and may not allocate (sandbox.c): it only calls prctl() with the
 * program built here. libseccomp adds the architecture check: a system
 * call of another ABI (i386's socketcall through int 0x80) kills the
 * process rather than slipping past a rule written for this one.
 */
#include <errno.h>
#include <seccomp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "sysfilter.h"

static struct sock_fprog no_unix;

/* ctx as BPF in prog (malloc'd); 0 or -errno. libseccomp 2.5 exports only
 * to a descriptor: a memfd, read back once. */
static int export(scmp_filter_ctx ctx, struct sock_fprog *prog)
{
    int fd = memfd_create("toolexecd-seccomp", MFD_CLOEXEC);
    if (fd < 0)
        return -errno;
    int rc = seccomp_export_bpf(ctx, fd);
    struct stat st;
    if (rc == 0 && fstat(fd, &st) < 0)
        rc = -errno;
    if (rc == 0 && (st.st_size <= 0 || st.st_size % sizeof(struct sock_filter) ||
                    st.st_size / sizeof(struct sock_filter) > BPF_MAXINSNS))
        rc = -EINVAL;
    struct sock_filter *insns = rc == 0 ? malloc((size_t)st.st_size) : NULL;
    if (rc == 0 && !insns)
        rc = -ENOMEM;
    if (rc == 0 && pread(fd, insns, (size_t)st.st_size, 0) != st.st_size)
        rc = -EIO;
    close(fd);
    if (rc < 0) {
        free(insns);
        return rc;
    }
    prog->filter = insns;
    prog->len = (unsigned short)(st.st_size / sizeof(struct sock_filter));
    return 0;
}

int td_sysfilter_setup(void)
{
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    int rc = ctx ? 0 : -ENOMEM;
    /* the worker sets no_new_privs itself, one step before the filter */
    if (rc == 0)
        rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0);
    if (rc == 0)
        rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EACCES), SCMP_SYS(socket), 1,
                              SCMP_A0(SCMP_CMP_EQ, AF_UNIX));
    if (rc == 0)
        rc = export(ctx, &no_unix);
    seccomp_release(ctx);
    if (rc < 0)
        td_log(TD_LOG_ERR, "seccomp: cannot build the worker filter: %s", strerror(-rc));
    return rc < 0 ? -1 : 0;
}

const struct sock_fprog *td_sysfilter_get(bool network)
{
    return network ? NULL : &no_unix;
}

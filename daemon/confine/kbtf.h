/*
 * kbtf.h - offsets of the kernel's own structures, read from its BTF
 * (/sys/kernel/btf/vmlinux) by a scan of its type records (kbtf.c).
 */
#ifndef TD_KBTF_H
#define TD_KBTF_H

#include <stddef.h>
#include <stdint.h>

/* The byte offsets of struct task_struct's tgid and real_parent in the
 * running kernel: 0, or -errno (no BTF, a malformed one, not found). */
int td_kbtf_task_offsets(uint32_t *tgid, uint32_t *real_parent);

/* The same from BTF data in memory (kbtf.c's scan alone: the unit test). */
int td_kbtf_task_offsets_in(const void *btf, size_t len, uint32_t *tgid, uint32_t *real_parent);

/* The same from the BTF file open on fd (len bytes), in windows of 4 KiB,
 * at most reads of them: -E2BIG past them. */
int td_kbtf_task_offsets_fd(int fd, size_t len, unsigned reads, uint32_t *tgid,
                            uint32_t *real_parent);

#endif

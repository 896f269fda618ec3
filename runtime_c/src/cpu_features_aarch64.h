/* cpu_features_aarch64.h - the aarch64 extensions a "cpu" entry's code needs, against the
 * kernel's hardware capabilities (cpu_features_aarch64.c); cpu_features.c calls it on
 * aarch64 as it looks x86 features up with CPUID on x86-64. */
#ifndef AOT_CPU_FEATURES_AARCH64_H
#define AOT_CPU_FEATURES_AARCH64_H

#include "internal.h"

/* getauxval(AT_HWCAP) and (AT_HWCAP2): a bit is set where the CPU has the extension and
 * the kernel lets user code use it */
typedef struct {
  uint64_t hwcap;
  uint64_t hwcap2;
} aot__aarch64_caps_t;

/* this machine's; zeros off aarch64 Linux */
AOT_HIDDEN aot__aarch64_caps_t aot__aarch64_caps(void);

/* cpu_entry's "aarch64_features" (LLVM's names; absent or null: none) that `caps` lacks:
 * *out_count of them, named (comma-separated, truncated to fit) in names[size]. A name this
 * runtime does not know counts as lacking: it cannot vouch for it. AOT_ERR_FORMAT for a
 * list that is not an array of at most 256 non-empty strings without NULs. */
AOT_HIDDEN aot_status_t aot__aarch64_lacking(const aot__json_t* cpu_entry, aot__aarch64_caps_t caps,
                                             char* names, size_t size, size_t* out_count,
                                             aot_error_t* err);

#endif

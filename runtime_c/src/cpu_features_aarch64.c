/* cpu_features_aarch64.c - does this aarch64 machine have the extensions an artifact's code
 * needs?
 *
 * Code built for a Neoverse V1 uses SVE and dies with SIGILL on a Neoverse N1. The compiler
 * lists, in the "cpu" entry's "aarch64_features", the extensions LLVM may select in its code
 * (AARCH64_CHECKED_FEATURES in aot/codegen/cpu/aarch64_features.py, LLVM's names). Each is
 * looked up in the hardware capabilities the kernel gives every process (AT_HWCAP,
 * AT_HWCAP2): the kernel sets a bit only where the CPU has the extension and the kernel
 * enables it for user code (SVE's registers saved on a context switch), so no instruction
 * that could fault is run to find out. */
#include <stdio.h>
#include <string.h>

#include "cpu_features_aarch64.h"

#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#endif


/* the bits, from Linux's arch/arm64/include/uapi/asm/hwcap.h (spelt out: older kernel
 * headers lack the newer ones, and the table is read on every architecture in tests) */
typedef struct {
  const char* name; /* LLVM's */
  uint8_t second;   /* 0: AT_HWCAP, 1: AT_HWCAP2 */
  uint64_t bits;    /* every one needed */
} feature_t;

static const feature_t kFeatures[] = {
    {"lse", 0, UINT64_C(1) << 8},                             /* HWCAP_ATOMICS */
    {"fullfp16", 0, UINT64_C(1) << 9 | UINT64_C(1) << 10},    /* HWCAP_FPHP, HWCAP_ASIMDHP */
    {"dotprod", 0, UINT64_C(1) << 20},                        /* HWCAP_ASIMDDP */
    {"i8mm", 1, UINT64_C(1) << 13},                           /* HWCAP2_I8MM */
    {"bf16", 1, UINT64_C(1) << 14},                           /* HWCAP2_BF16 */
    {"sve", 0, UINT64_C(1) << 22},                            /* HWCAP_SVE */
    {"sve2", 1, UINT64_C(1) << 1},                            /* HWCAP2_SVE2 */
    {"cssc", 1, UINT64_C(1) << 34},                           /* HWCAP2_CSSC */
    {"mops", 1, UINT64_C(1) << 43},                           /* HWCAP2_MOPS */
};

aot__aarch64_caps_t aot__aarch64_caps(void) {
  aot__aarch64_caps_t caps = {0, 0};
#if defined(__aarch64__) && defined(__linux__)
  caps.hwcap = (uint64_t)getauxval(AT_HWCAP);
  caps.hwcap2 = (uint64_t)getauxval(AT_HWCAP2);
#endif
  return caps;
}

/* "" when `caps` has the feature, else why not */
static const char* missing(aot__aarch64_caps_t caps, const char* name) {
  for (size_t i = 0; i < sizeof kFeatures / sizeof kFeatures[0]; i++) {
    const feature_t* f = &kFeatures[i];
    if (strcmp(f->name, name) != 0) continue;
    uint64_t have = f->second ? caps.hwcap2 : caps.hwcap;
    return (have & f->bits) == f->bits ? "" : "missing";
  }
  return "unknown to this runtime";
}

aot_status_t aot__aarch64_lacking(const aot__json_t* cpu_entry, aot__aarch64_caps_t caps,
                                  char* names, size_t size, size_t* out_count,
                                  aot_error_t* err) {
  *out_count = 0;
  if (size) names[0] = '\0';
  const aot__json_t* list;
  aot_status_t st = aot__cpu_feature_list(cpu_entry, "aarch64_features", &list, err);
  if (st || !list) return st;
  size_t used = 0;
  for (const aot__json_t* f = list->first; f; f = f->next) {
    const char* why = missing(caps, f->str);
    if (!why[0]) continue;
    ++*out_count;
    if (used + 1 >= size) continue; /* counted, no room left to name it */
    /* "missing" goes without saying; an unknown name is spelt out */
    int unknown = strcmp(why, "missing") != 0;
    int n = snprintf(names + used, size - used, "%s%s%s%s%s", used ? ", " : "", f->str,
                     unknown ? " (" : "", unknown ? why : "", unknown ? ")" : "");
    if (n < 0) break;
    used = (size_t)n < size - used ? used + (size_t)n : size - 1;
  }
  return AOT_OK;
}

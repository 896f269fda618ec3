/* cpu_features.c - does this machine have the x86 features an artifact's code needs?
 *
 * Code built for an AVX-512 machine dies with SIGILL on an AVX2 one. The
 * compiler lists, in each "cpu" entry's "x86_features", the instruction
 * set extensions its code may use (X86_CHECKED_FEATURES in
 * aot/codegen/cpu/target.py, LLVM's names). Each is looked up with CPUID, and
 * for the AVX, AVX-512 and APX register state XGETBV says whether the OS saves
 * it: a CPU can have AVX-512 that the kernel (or a hypervisor) leaves off, and
 * the first such instruction then faults like a missing one. A name this
 * runtime does not know counts as missing: it cannot vouch for it. An artifact
 * without the field (from an older compiler) is not checked. model.c loads the
 * first variant (entry) of this architecture that lacks nothing. */
#include <stdio.h>
#include <string.h>

#include "cpu_features_aarch64.h"
#include "internal.h"

/* more names than any real CPU has: a longer list is a damaged manifest */
#define MAX_FEATURES 256u

#if defined(__x86_64__)
#include <cpuid.h>

/* where a feature's bit lives: one CPUID output register each */
enum {
  L1_ECX,     /* leaf 1 */
  L7_EBX,     /* leaf 7, subleaf 0 */
  L7_ECX,
  L7_EDX,
  L7S1_EAX,   /* leaf 7, subleaf 1 */
  L7S1_EDX,
  LX1_ECX,    /* leaf 0x80000001 */
  AVX10_VER,  /* leaf 0x24 EBX[7:0]: the AVX10 version, when leaf 7.1 EDX[19] says there is one */
  WORDS
};

/* register state the OS must enable in XCR0 (x87/SSE, AVX, AVX-512's opmask and
 * upper ZMM, APX's extended GPRs) */
#define STATE_AVX UINT64_C(0x6)
#define STATE_AVX512 UINT64_C(0xE6)
#define STATE_APX (UINT64_C(1) << 19)

typedef struct {
  const char* name; /* LLVM's */
  uint8_t word;
  uint8_t bit;      /* AVX10_VER: the least version */
  uint64_t state;   /* XCR0 bits, 0: none beyond SSE */
} feature_t;

static const feature_t kFeatures[] = {
    {"sse3", L1_ECX, 0, 0},
    {"ssse3", L1_ECX, 9, 0},
    {"fma", L1_ECX, 12, STATE_AVX},
    {"sse4.1", L1_ECX, 19, 0},
    {"sse4.2", L1_ECX, 20, 0},
    {"movbe", L1_ECX, 22, 0},
    {"popcnt", L1_ECX, 23, 0},
    {"avx", L1_ECX, 28, STATE_AVX},
    {"f16c", L1_ECX, 29, STATE_AVX},
    {"bmi", L7_EBX, 3, 0},
    {"avx2", L7_EBX, 5, STATE_AVX},
    {"bmi2", L7_EBX, 8, 0},
    {"avx512f", L7_EBX, 16, STATE_AVX512},
    {"avx512dq", L7_EBX, 17, STATE_AVX512},
    {"avx512ifma", L7_EBX, 21, STATE_AVX512},
    {"avx512cd", L7_EBX, 28, STATE_AVX512},
    {"avx512bw", L7_EBX, 30, STATE_AVX512},
    {"avx512vl", L7_EBX, 31, STATE_AVX512},
    {"avx512vbmi", L7_ECX, 1, STATE_AVX512},
    {"avx512vbmi2", L7_ECX, 6, STATE_AVX512},
    {"gfni", L7_ECX, 8, 0},
    {"avx512vnni", L7_ECX, 11, STATE_AVX512},
    {"avx512bitalg", L7_ECX, 12, STATE_AVX512},
    {"avx512vpopcntdq", L7_ECX, 14, STATE_AVX512},
    {"avx512fp16", L7_EDX, 23, STATE_AVX512},
    {"avxvnni", L7S1_EAX, 4, STATE_AVX},
    {"avx512bf16", L7S1_EAX, 5, STATE_AVX512},
    {"avxifma", L7S1_EAX, 23, STATE_AVX},
    {"avxvnniint8", L7S1_EDX, 4, STATE_AVX},
    {"avxneconvert", L7S1_EDX, 5, STATE_AVX},
    {"avxvnniint16", L7S1_EDX, 10, STATE_AVX},
    /* APX: one CPUID bit (APX_F) for all of LLVM's APX features */
    {"egpr", L7S1_EDX, 21, STATE_APX},
    {"push2pop2", L7S1_EDX, 21, STATE_APX},
    {"ppx", L7S1_EDX, 21, STATE_APX},
    {"ndd", L7S1_EDX, 21, STATE_APX},
    {"ccmp", L7S1_EDX, 21, STATE_APX},
    {"nf", L7S1_EDX, 21, STATE_APX},
    {"cf", L7S1_EDX, 21, STATE_APX},
    {"zu", L7S1_EDX, 21, STATE_APX},
    {"avx10.1", AVX10_VER, 1, STATE_AVX512},
    {"avx10.2", AVX10_VER, 2, STATE_AVX512},
    {"lzcnt", LX1_ECX, 5, 0},
    {"xop", LX1_ECX, 11, STATE_AVX},
    {"fma4", LX1_ECX, 16, STATE_AVX},
    {"tbm", LX1_ECX, 21, 0},
};

typedef struct {
  uint32_t words[WORDS];
  uint64_t xcr0; /* 0 when the OS has not enabled XSAVE */
} cpu_t;

static void read_cpu(cpu_t* cpu) {
  memset(cpu, 0, sizeof *cpu);
  unsigned a, b, c, d;
  unsigned max = (unsigned)__get_cpuid_max(0, NULL);
  if (max >= 1) {
    __cpuid(1, a, b, c, d);
    cpu->words[L1_ECX] = c;
    if (c & (1u << 27)) { /* OSXSAVE: XGETBV is there and XCR0 is the OS's choice */
      uint32_t lo, hi;
      __asm__ __volatile__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
      cpu->xcr0 = (uint64_t)hi << 32 | lo;
    }
  }
  if (max >= 7) {
    __cpuid_count(7, 0, a, b, c, d);
    cpu->words[L7_EBX] = b;
    cpu->words[L7_ECX] = c;
    cpu->words[L7_EDX] = d;
    if (a >= 1) {
      __cpuid_count(7, 1, a, b, c, d);
      cpu->words[L7S1_EAX] = a;
      cpu->words[L7S1_EDX] = d;
    }
  }
  if ((cpu->words[L7S1_EDX] & (1u << 19)) && max >= 0x24) {
    __cpuid_count(0x24, 0, a, b, c, d);
    cpu->words[AVX10_VER] = b & 0xFF;
  }
  if ((unsigned)__get_cpuid_max(0x80000000, NULL) >= 0x80000001u) {
    __cpuid(0x80000001, a, b, c, d);
    cpu->words[LX1_ECX] = c;
  }
}

/* "" when this machine has the feature, else why not */
static const char* missing(const cpu_t* cpu, const char* name) {
  for (size_t i = 0; i < sizeof kFeatures / sizeof kFeatures[0]; i++) {
    const feature_t* f = &kFeatures[i];
    if (strcmp(f->name, name) != 0) continue;
    uint32_t w = cpu->words[f->word];
    int has = f->word == AVX10_VER ? w >= f->bit : (int)((w >> f->bit) & 1u);
    if (!has) return "missing";
    if ((cpu->xcr0 & f->state) != f->state) return "not enabled by the OS";
    return "";
  }
  return "unknown to this runtime";
}
#endif /* __x86_64__ */

/* cpu_entry's feature list `key` ("x86_features", "aarch64_features"), checked for form:
 * NULL when the entry has none to check (absent, null: an older compiler's artifact, or
 * empty). */
aot_status_t aot__cpu_feature_list(const aot__json_t* cpu_entry, const char* key,
                                   const aot__json_t** out, aot_error_t* err) {
  *out = NULL;
  const aot__json_t* list = aot__json_get(cpu_entry, key);
  if (!list || list->kind == AOT_JSON_NULL) return AOT_OK;
  if (list->kind != AOT_JSON_ARRAY || list->count > MAX_FEATURES)
    return aot__fail(err, AOT_ERR_FORMAT, "manifest: cpu: \"%s\" must be an array of at most %u names",
                     key, MAX_FEATURES);
  for (const aot__json_t* f = list->first; f; f = f->next)
    if (f->kind != AOT_JSON_STRING || strlen(f->str) != f->str_len || !f->str[0])
      return aot__fail(err, AOT_ERR_FORMAT,
                       "manifest: cpu: \"%s\" must hold non-empty strings without NULs", key);
  if (list->count) *out = list;
  return AOT_OK;
}

aot_status_t aot__cpu_lacking(const aot__json_t* cpu_entry, char* names, size_t size,
                              size_t* out_count, aot_error_t* err) {
#if defined(__aarch64__)
  /* an aarch64 entry lists "aarch64_features", looked up in the kernel's hwcaps */
  return aot__aarch64_lacking(cpu_entry, aot__aarch64_caps(), names, size, out_count, err);
#endif
  *out_count = 0;
  if (size) names[0] = '\0';
  const aot__json_t* list;
  aot_status_t st = aot__cpu_feature_list(cpu_entry, "x86_features", &list, err);
  if (st || !list) return st;
#if defined(__x86_64__)
  cpu_t cpu;
  read_cpu(&cpu);
  size_t used = 0;
  for (const aot__json_t* f = list->first; f; f = f->next) {
    const char* why = missing(&cpu, f->str);
    if (!why[0]) continue;
    ++*out_count;
    if (used + 1 >= size) continue; /* counted, no room left to name it */
    /* "missing" goes without saying; the rarer reasons are spelt out */
    int n = snprintf(names + used, size - used, "%s%s%s%s%s", used ? ", " : "", f->str,
                     strcmp(why, "missing") ? " (" : "", strcmp(why, "missing") ? why : "",
                     strcmp(why, "missing") ? ")" : "");
    if (n < 0) break;
    used = (size_t)n < size - used ? used + (size_t)n : size - 1;
  }
#else
  *out_count = list->count;
  if (size) snprintf(names, size, "x86 features on a machine that is not x86-64");
#endif
  return AOT_OK;
}

aot_status_t aot__cpu_check(const aot__json_t* cpu_entry, aot_error_t* err) {
  char names[AOT_ERROR_MESSAGE_SIZE];
  size_t lacking;
  aot_status_t st = aot__cpu_lacking(cpu_entry, names, sizeof names, &lacking, err);
  if (st || !lacking) return st;
#if defined(__x86_64__) || defined(__aarch64__)
  const char* built_for = NULL;
  const aot__json_t* c = aot__json_get(cpu_entry, "cpu");
  if (c && c->kind == AOT_JSON_STRING && strlen(c->str) == c->str_len && c->str[0])
    built_for = c->str;
  return aot__fail(err, AOT_ERR_UNSUPPORTED,
                   "this CPU lacks %zu feature%s the code needs (built for %s): %s", lacking,
                   lacking == 1 ? "" : "s", built_for ? built_for : "another CPU", names);
#else
  return aot__fail(err, AOT_ERR_UNSUPPORTED,
                   "the code needs %zu x86 feature%s (\"x86_features\"), and this is not an x86-64 "
                   "machine",
                   lacking, lacking == 1 ? "" : "s");
#endif
}

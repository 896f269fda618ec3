/* A hand-written stand-in for compiler output, linked with
 * -shared -nostdlib like the real thing.
 * inputs:  x float32 [4,37]
 * weights: w float32 [37] at offset 0
 * arena:   t float32 [148] at offset 0
 * outputs: y float32 [4,37] = x * w + 1;  s float32 [] = sum(y)
 * kernels: 0: t = x * w (148 items), 1: y = t + 1 (148), 2: s = sum(y) (1);
 *          aot_kernel_inc: y += 1 (148), which a test lists twice after kernel 1
 *          (entry aot_model_entry_inc) to see that every item runs exactly once
 * checks:  0: x[0] < 1000, 1: y[1] < 1001 (read after the last kernel, as
 *          compiled checks are); aot_model_checks_broken answers out of range
 * donated: y takes over x's buffer (aot_code_info_donated): aot_kernel_donated reads x
 *          from out[0], where a donated input is, and doubles it in place (y = 2x, 148
 *          items); kernel 2 sums y (entry aot_model_entry_donated) */
#include <stdint.h>

#define N 148
#define C 37

__attribute__((visibility("default"))) void aot_kernel_0(const void* const* in, void* const* out,
                                                        uint8_t* arena, const uint8_t* weights,
                                                        int64_t b, int64_t e) {
  (void)out;
  const float* x = (const float*)in[0];
  const float* w = (const float*)weights;
  float* t = (float*)arena;
  for (int64_t i = b; i < e; i++) t[i] = x[i] * w[i % C];
}

__attribute__((visibility("default"))) void aot_kernel_1(const void* const* in, void* const* out,
                                                        uint8_t* arena, const uint8_t* weights,
                                                        int64_t b, int64_t e) {
  (void)in;
  (void)weights;
  const float* t = (const float*)arena;
  float* y = (float*)out[0];
  for (int64_t i = b; i < e; i++) y[i] = t[i] + 1.0f;
}

__attribute__((visibility("default"))) void aot_kernel_2(const void* const* in, void* const* out,
                                                        uint8_t* arena, const uint8_t* weights,
                                                        int64_t b, int64_t e) {
  (void)in;
  (void)arena;
  (void)weights;
  if (b >= e) return;
  const float* y = (const float*)out[0];
  float s = 0.0f;
  for (int64_t i = 0; i < N; i++) s += y[i];
  *(float*)out[1] = s;
}

__attribute__((visibility("default"))) void aot_kernel_inc(const void* const* in,
                                                          void* const* out, uint8_t* arena,
                                                          const uint8_t* weights, int64_t b,
                                                          int64_t e) {
  (void)in;
  (void)arena;
  (void)weights;
  float* y = (float*)out[0];
  for (int64_t i = b; i < e; i++) y[i] += 1.0f;
}

__attribute__((visibility("default"))) void aot_model_entry(const void* const* in,
                                                           void* const* out, uint8_t* arena,
                                                           const uint8_t* weights) {
  aot_kernel_0(in, out, arena, weights, 0, N);
  aot_kernel_1(in, out, arena, weights, 0, N);
  aot_kernel_2(in, out, arena, weights, 0, 1);
}

__attribute__((visibility("default"))) void aot_kernel_donated(const void* const* in,
                                                              void* const* out, uint8_t* arena,
                                                              const uint8_t* weights, int64_t b,
                                                              int64_t e) {
  (void)in;
  (void)arena;
  (void)weights;
  float* y = (float*)out[0];
  for (int64_t i = b; i < e; i++) y[i] *= 2.0f;
}

__attribute__((visibility("default"))) void aot_model_entry_donated(const void* const* in,
                                                                   void* const* out, uint8_t* arena,
                                                                   const uint8_t* weights) {
  aot_kernel_donated(in, out, arena, weights, 0, N);
  aot_kernel_2(in, out, arena, weights, 0, 1);
}

/* the entry of the kernel list k0, k1, inc, inc, k2 */
__attribute__((visibility("default"))) void aot_model_entry_inc(const void* const* in,
                                                               void* const* out, uint8_t* arena,
                                                               const uint8_t* weights) {
  aot_kernel_0(in, out, arena, weights, 0, N);
  aot_kernel_1(in, out, arena, weights, 0, N);
  aot_kernel_inc(in, out, arena, weights, 0, N);
  aot_kernel_inc(in, out, arena, weights, 0, N);
  aot_kernel_2(in, out, arena, weights, 0, 1);
}

__attribute__((visibility("default"))) int32_t aot_model_checks(const void* const* in,
                                                               void* const* out, uint8_t* arena,
                                                               const uint8_t* weights) {
  (void)arena;
  (void)weights;
  if (!(((const float*)in[0])[0] < 1000.0f)) return 1;
  if (!(((const float*)out[0])[1] < 1001.0f)) return 2;
  return 0;
}

__attribute__((visibility("default"))) int32_t aot_model_checks_broken(const void* const* in,
                                                                      void* const* out,
                                                                      uint8_t* arena,
                                                                      const uint8_t* weights) {
  (void)in;
  (void)out;
  (void)arena;
  (void)weights;
  return 3;
}

/* What the code was built for (runtime_c/src/code_info.c, packaging/FORMAT.md "Code
 * description"): one table per entry/checks pairing the tests use, picked by the manifest's
 * cpu[].code_info (default aot_code_info). */
#define KERNEL(f, work) \
  { (const void*)f, work }
#define INFO_HEAD(entry, kernels, checks, checks_fn)                                      \
  {'A', 'O', 'T', 'C', 'I', 'N', 'F', 'O'}, 1, N * 4, 64, C * 4, 64, 1, 2, kernels, checks, \
      (const void*)entry, (const void*)checks_fn, {N * 4, N * 4, 4}

typedef struct {
  const void* fn;
  uint64_t work;
} kernel_info_t;

#define CODE_INFO(kernel_count)                                                           \
  struct {                                                                                \
    char magic[8];                                                                        \
    uint64_t version, arena_bytes, arena_alignment, weights_bytes, weights_alignment;     \
    uint64_t inputs, outputs, kernels, checks;                                            \
    const void* entry;                                                                    \
    const void* checks_fn;                                                                \
    uint64_t sizes[3]; /* x; y, s */                                                      \
    kernel_info_t k[kernel_count];                                                        \
  }

#define VISIBLE __attribute__((visibility("default")))

VISIBLE const CODE_INFO(3) aot_code_info = {
    INFO_HEAD(aot_model_entry, 3, 0, 0),
    {KERNEL(aot_kernel_0, N), KERNEL(aot_kernel_1, N), KERNEL(aot_kernel_2, 1)}};

VISIBLE const CODE_INFO(3) aot_code_info_checked = {
    INFO_HEAD(aot_model_entry, 3, 2, aot_model_checks),
    {KERNEL(aot_kernel_0, N), KERNEL(aot_kernel_1, N), KERNEL(aot_kernel_2, 1)}};

VISIBLE const CODE_INFO(3) aot_code_info_checks_broken = {
    INFO_HEAD(aot_model_entry, 3, 2, aot_model_checks_broken),
    {KERNEL(aot_kernel_0, N), KERNEL(aot_kernel_1, N), KERNEL(aot_kernel_2, 1)}};

VISIBLE const CODE_INFO(5) aot_code_info_inc = {
    INFO_HEAD(aot_model_entry_inc, 5, 0, 0),
    {KERNEL(aot_kernel_0, N), KERNEL(aot_kernel_1, N), KERNEL(aot_kernel_inc, N),
     KERNEL(aot_kernel_inc, N), KERNEL(aot_kernel_2, 1)}};

/* test_zero_work's kernel lists: all three with no work, and only the first with work */
VISIBLE const CODE_INFO(3) aot_code_info_zero_work = {
    INFO_HEAD(aot_model_entry, 3, 0, 0),
    {KERNEL(aot_kernel_0, 0), KERNEL(aot_kernel_1, 0), KERNEL(aot_kernel_2, 0)}};

VISIBLE const CODE_INFO(3) aot_code_info_zero_tail = {
    INFO_HEAD(aot_model_entry, 3, 0, 0),
    {KERNEL(aot_kernel_0, N), KERNEL(aot_kernel_1, 0), KERNEL(aot_kernel_2, 0)}};

/* tests/runtime/test_runtime_c.py's inputs the kernels ignore: x, then e bool [0,3], b bfloat16 [2],
 * i int64 [] */
VISIBLE const struct {
  char magic[8];
  uint64_t version, arena_bytes, arena_alignment, weights_bytes, weights_alignment;
  uint64_t inputs, outputs, kernels, checks;
  const void* entry;
  const void* checks_fn;
  uint64_t sizes[6]; /* x, e, b, i; y, s */
  kernel_info_t k[3];
} aot_code_info_extra_inputs = {
    {'A', 'O', 'T', 'C', 'I', 'N', 'F', 'O'}, 1, N * 4, 64, C * 4, 64, 4, 2, 3, 0,
    (const void*)aot_model_entry, 0, {N * 4, 0, 4, 8, N * 4, 4},
    {KERNEL(aot_kernel_0, N), KERNEL(aot_kernel_1, N), KERNEL(aot_kernel_2, 1)}};

/* the donated model: a version 2 table, whose donated pairs follow the kernels */
#define DONATED_INFO(output)                                                                 \
  {{'A', 'O', 'T', 'C', 'I', 'N', 'F', 'O'}, 2, N * 4, 64, C * 4, 64, 1, 2, 2, 0,                \
   (const void*)aot_model_entry_donated, 0, {N * 4, N * 4, 4},                                \
   {KERNEL(aot_kernel_donated, N), KERNEL(aot_kernel_2, 1)}, 1, {0, output}}
typedef struct {
  char magic[8];
  uint64_t version, arena_bytes, arena_alignment, weights_bytes, weights_alignment;
  uint64_t inputs, outputs, kernels, checks;
  const void* entry;
  const void* checks_fn;
  uint64_t sizes[3]; /* x; y, s */
  kernel_info_t k[2];
  uint64_t donations;
  uint64_t pairs[2]; /* input, output */
} donated_info_t;

VISIBLE const donated_info_t aot_code_info_donated = DONATED_INFO(0);
/* a table built to give x to output 1: a manifest giving it to y is not what it was built for */
VISIBLE const donated_info_t aot_code_info_donated_to_s = DONATED_INFO(1);

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
 *          compiled checks are); aot_model_checks_broken answers out of range */
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

/* schedule.c - how a context with n threads splits each kernel of a model.
 *
 * Handing a kernel to other threads costs about a microsecond of
 * synchronisation, plus moving its operands between cores' caches; most
 * kernels of a small transformer take only a few microseconds. So a kernel is
 * split only when its compile-time cost estimate (manifest "cost_ns") gives
 * every chunk at least AOT__MIN_CHUNK_NS of work and there are at least two chunks;
 * otherwise the calling thread runs it whole, without telling any other thread.
 * A kernel without an estimate (an artifact from before "cost_ns") is split
 * by its item count alone, as runtimes before the estimate did. The pool
 * calls this again after its calibration runs with the kernel's measured time
 * as cost_ns (threadpool.c), so the same rule then applies to this machine's
 * times. */
#include "internal.h"

aot__split_t aot__split_kernel(const aot__kernel_t* k, uint32_t threads) {
  aot__split_t whole = {k->work, 1};
  if (threads < 2 || k->work < 2) return whole;
  int64_t chunks = (int64_t)threads * AOT__CHUNKS_PER_THREAD;
  if (k->cost_ns >= 0 && k->cost_ns / AOT__MIN_CHUNK_NS < chunks)
    chunks = k->cost_ns / AOT__MIN_CHUNK_NS;
  if (chunks > AOT__MAX_CHUNKS) chunks = AOT__MAX_CHUNKS;
  if (chunks > k->work) chunks = k->work;
  if (chunks < 2) return whole;
  /* equal chunks of ceil(work / chunks) items; the last may be shorter, and
   * rounding up can leave fewer chunks than asked (never fewer than 2) */
  int64_t items = (k->work + chunks - 1) / chunks;
  aot__split_t split = {items, (uint32_t)((k->work + items - 1) / items)};
  return split;
}

int aot__model_splits(const aot_model_t* m, uint32_t threads) {
  for (uint32_t i = 0; i < m->kernel_count; i++)
    if (aot__split_kernel(&m->kernels[i], threads).chunks > 1) return 1;
  return 0;
}

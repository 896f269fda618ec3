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
 * times. A kernel with work for many chunks is cut into a head and a tail
 * (internal.h): one large chunk per thread, then small ones to even out the
 * finish. */
#include "internal.h"

/* equal chunks of ceil(work / chunks) items; the last may be shorter, and
 * rounding up can leave fewer chunks than asked (never fewer than 2) */
static aot__split_t equal_chunks(int64_t work, int64_t chunks) {
  int64_t items = (work + chunks - 1) / chunks;
  uint32_t made = (uint32_t)((work + items - 1) / items);
  aot__split_t split = {items, made, made, items};
  return split;
}

aot__split_t aot__split_kernel(const aot__kernel_t* k, uint32_t threads) {
  aot__split_t whole = {k->work, 1, 1, k->work};
  if (threads < 2 || k->work < 2) return whole;
  int64_t work = k->work;
  int64_t equal = (int64_t)threads * AOT__CHUNKS_PER_THREAD;
  if (equal > AOT__MAX_CHUNKS) equal = AOT__MAX_CHUNKS;
  /* no estimate (an artifact from before "cost_ns"): equal chunks by item count, as then */
  if (k->cost_ns < 0) return equal_chunks(work, equal < work ? equal : work);
  /* the most chunks the estimate pays for, each at least MIN_CHUNK_NS */
  int64_t most = k->cost_ns / AOT__MIN_CHUNK_NS;
  if (most > work) most = work;
  if (most > AOT__MAX_CHUNKS) most = AOT__MAX_CHUNKS;
  if (most < 2) return whole;
  if (most <= equal) return equal_chunks(work, most);
  /* a head chunk per thread, then the tail in chunks of at least `smallest` items, as few
   * as that leaves: more, equal chunks instead (up to 18 on 2 threads) made mobilenetv2,
   * bert_mini and gpt_block 4-8% slower on 2 threads than this (a kernel's chunks taken
   * turn about by the two threads, each reading what the other wrote) */
  int64_t head = work / 100 * AOT__HEAD_PERCENT + work % 100 * AOT__HEAD_PERCENT / 100;
  int64_t head_items = head / threads;
  int64_t rest = work - head_items * threads;
  int64_t smallest = (work + most - 1) / most;
  int64_t tail_chunks = (int64_t)threads * AOT__TAIL_CHUNKS_PER_THREAD;
  int64_t tail_items = (rest + tail_chunks - 1) / tail_chunks;
  if (tail_items < smallest) tail_items = smallest;
  tail_chunks = (rest + tail_items - 1) / tail_items;
  if (head_items < smallest || threads + tail_chunks > AOT__MAX_CHUNKS)
    return equal_chunks(work, equal); /* most > equal here */
  aot__split_t split = {head_items, (uint32_t)(threads + tail_chunks), threads, tail_items};
  return split;
}

int aot__model_splits(const aot_model_t* m, uint32_t threads) {
  for (uint32_t i = 0; i < m->kernel_count; i++)
    if (aot__split_kernel(&m->kernels[i], threads).chunks > 1) return 1;
  return 0;
}

/* C tests of schedule.c: which kernels a context splits across its threads,
 * and that every split covers [0, work) exactly once. */
#include <stdio.h>

#include "check.h"
#include "internal.h"

static aot__split_t split(int64_t work, int64_t cost_ns, uint32_t threads) {
  aot__kernel_t k = {NULL, NULL, work, cost_ns};
  return aot__split_kernel(&k, threads);
}

static void test_whole(void) {
  /* one thread, one item, or too little estimated work: the caller runs it whole */
  aot__split_t s = split(1000, -1, 1);
  CHECK(s.chunks == 1 && s.items == 1000, "one thread: %u x %lld", s.chunks, (long long)s.items);
  s = split(1, 1000000000, 8);
  CHECK(s.chunks == 1 && s.items == 1, "one item: %u", s.chunks);
  s = split(0, -1, 8);
  CHECK(s.chunks == 1 && s.items == 0, "no items: %u", s.chunks);
  s = split(4096, 2 * AOT__MIN_CHUNK_NS - 1, 8);
  CHECK(s.chunks == 1, "below two chunks' worth: %u", s.chunks);
  s = split(4096, 0, 8);
  CHECK(s.chunks == 1, "free kernel: %u", s.chunks);
}

static void test_split(void) {
  /* just two chunks' worth: two chunks, one per thread at most */
  aot__split_t s = split(148, 2 * AOT__MIN_CHUNK_NS, 4);
  CHECK(s.chunks == 2 && s.items == 74, "two chunks: %u x %lld", s.chunks, (long long)s.items);
  /* plenty of work: CHUNKS_PER_THREAD per thread */
  s = split(800, 1000000000, 2);
  CHECK(s.chunks == 2 * AOT__CHUNKS_PER_THREAD && s.items == 100, "%u x %lld", s.chunks,
        (long long)s.items);
  /* more chunks than items are never made */
  s = split(3, 1000000000, 8);
  CHECK(s.chunks == 3 && s.items == 1, "three items: %u x %lld", s.chunks, (long long)s.items);
  /* no estimate (an older artifact): split by item count, as before estimates */
  s = split(148, -1, 4);
  CHECK(s.chunks == 15 && s.items == 10, "no estimate: %u x %lld", s.chunks, (long long)s.items);
}

/* For many shapes: chunks cover [0, work) exactly (the last may be short, none
 * empty), never exceed CHUNKS_PER_THREAD per thread, and each holds at least
 * MIN_CHUNK_NS of estimated work. */
static void test_cover(void) {
  static const int64_t works[] = {2, 3, 7, 24, 97, 128, 1000, 4097, INT64_MAX / 4};
  static const int64_t costs[] = {-1, 0, AOT__MIN_CHUNK_NS, 3 * AOT__MIN_CHUNK_NS + 1, 100000,
                                  INT64_MAX};
  static const uint32_t threads[] = {1, 2, 3, 4, 16, 1024, 100000};
  for (size_t w = 0; w < sizeof works / sizeof works[0]; w++)
    for (size_t c = 0; c < sizeof costs / sizeof costs[0]; c++)
      for (size_t t = 0; t < sizeof threads / sizeof threads[0]; t++) {
        int64_t work = works[w], cost = costs[c];
        aot__split_t s = split(work, cost, threads[t]);
        int64_t chunks = s.chunks;
        CHECK(chunks >= 1 && s.items >= 1 && (chunks - 1) * s.items < work &&
                  chunks * s.items >= work,
              "work %lld cost %lld threads %u: %lld x %lld", (long long)work, (long long)cost,
              threads[t], (long long)chunks, (long long)s.items);
        CHECK(chunks <= (int64_t)threads[t] * AOT__CHUNKS_PER_THREAD || chunks == 1, "%lld chunks",
              (long long)chunks);
        CHECK(chunks <= AOT__MAX_CHUNKS, "%lld chunks", (long long)chunks);
        CHECK(chunks == 1 || cost < 0 || cost / chunks >= AOT__MIN_CHUNK_NS,
              "work %lld cost %lld: %lld chunks too small", (long long)work, (long long)cost,
              (long long)chunks);
      }
}

static void test_model_splits(void) {
  aot__kernel_t ks[2] = {{NULL, NULL, 100, 10}, {NULL, NULL, 1, 1000000000}};
  aot_model_t m = {0};
  m.kernels = ks;
  m.kernel_count = 2;
  CHECK(!aot__model_splits(&m, 2), "small kernels only: no pool");
  ks[0].cost_ns = 1000000;
  CHECK(aot__model_splits(&m, 2), "a large kernel: a pool");
  CHECK(!aot__model_splits(&m, 1), "one thread: no pool");
  m.kernel_count = 0;
  CHECK(!aot__model_splits(&m, 8), "no kernels: no pool");
}

int main(void) {
  test_whole();
  test_split();
  test_cover();
  test_model_splits();
  printf("test_schedule: %d checks, %d failures\n", g_checks, g_failures);
  return g_failures ? 1 : 0;
}

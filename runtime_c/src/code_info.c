/* code_info.c - compare the code section's own description with the manifest.
 *
 * The manifest is JSON that anyone can edit and reseal (CRCs recomputed); the
 * code is what runs, and it trusts the buffers it is given. So the compiler
 * writes into the code a read-only table of what it was built for (exported
 * as `aot_code_info`, layout in packaging/FORMAT.md "Code description"): arena
 * and weights bytes and alignment, the byte size of every input and output,
 * the entry and checks functions, the check count, and each kernel's address
 * and work items. At open the runtime refuses a manifest that differs from it
 * in any of these (AOT_ERR_FORMAT naming the field and both values), so an
 * edited arena size, tensor shape, kernel work or symbol cannot send the code
 * past its buffers. IREE's executable libraries answer such a query before
 * use (iree_hal_executable_library_query). Version 2 tables end with the
 * donated pairs the code reads from its outputs' buffers (version 1: none),
 * which the manifest's "donations" must equal: a runtime that copied no input
 * where the code expects it would run it on stale bytes.
 *
 * Loading code is the trust boundary: the table is trusted like the code, but
 * its symbol size is still checked against its counts where the C library can
 * tell it (glibc's dladdr1). */
#include <inttypes.h>
#include <string.h>

#include "internal.h"

enum {
  W_MAGIC,
  W_VERSION,
  W_ARENA_BYTES,
  W_ARENA_ALIGN,
  W_WEIGHTS_BYTES,
  W_WEIGHTS_ALIGN,
  W_INPUTS,
  W_OUTPUTS,
  W_KERNELS,
  W_CHECKS,
  W_ENTRY,
  W_CHECKS_FN,
  HEAD_WORDS
};

static uint64_t effective_align(uint64_t a) { return a < 64 ? 64 : a; }

static aot_status_t differs(aot_error_t* err, const char* field, uint64_t manifest, uint64_t code) {
  return aot__fail(err, AOT_ERR_FORMAT, "manifest: %s is %" PRIu64 ", the code was built for %" PRIu64
                   " (%s)", field, manifest, code, AOT__CODE_INFO_SYMBOL);
}

static aot_status_t check_tensors(const char* what, const aot__tensor_desc_t* d, uint32_t n,
                                  const uint64_t* sizes, aot_error_t* err) {
  for (uint32_t i = 0; i < n; i++)
    if (d[i].byte_size != sizes[i])
      return aot__fail(err, AOT_ERR_FORMAT,
                       "manifest: %s[%u] ('%s') is %" PRIu64 " bytes, the code was built for %" PRIu64
                       " (%s)", what, i, d[i].name, d[i].byte_size, sizes[i], AOT__CODE_INFO_SYMBOL);
  return AOT_OK;
}

/* The donated pairs: `d` the table's donation words (NULL: a version 1 table, none), `size`
 * its bytes where known, `words` the words before `d`. */
static aot_status_t check_donations(const aot_model_t* m, const uint64_t* d, uint64_t size, uint64_t words,
                                    const char* symbol, aot_error_t* err) {
  uint64_t count = 0;
  if (d) {
    if (size / sizeof(uint64_t) < words + 1)
      return aot__fail(err, AOT_ERR_FORMAT, "code: '%s' is %" PRIu64 " bytes, too short for its donations",
                       symbol, size);
    count = d[0];
  }
  if (count != m->donation_count)
    return aot__fail(err, AOT_ERR_FORMAT, "manifest: %u donations, the code was built for %" PRIu64
                     " (%s): an input the code reads from its output's buffer must be donated there, and "
                     "only such an input", m->donation_count, count, AOT__CODE_INFO_SYMBOL);
  /* count == donation_count <= input_count < 2^31: no overflow */
  if (count && size / sizeof(uint64_t) < words + 1 + 2 * count)
    return aot__fail(err, AOT_ERR_FORMAT, "code: '%s' is %" PRIu64 " bytes, its %" PRIu64 " donations need %"
                     PRIu64, symbol, size, count, (words + 1 + 2 * count) * (uint64_t)sizeof(uint64_t));
  for (uint32_t i = 0; i < m->donation_count; i++) {
    const aot__donation_t* g = &m->donations[i];
    if (d[1 + 2 * i] != g->input || d[2 + 2 * i] != g->output)
      return aot__fail(err, AOT_ERR_FORMAT, "manifest: donations[%u] gives input %u to output %u, the code "
                       "was built to give input %" PRIu64 " to output %" PRIu64 " (%s)", i, g->input,
                       g->output, d[1 + 2 * i], d[2 + 2 * i], AOT__CODE_INFO_SYMBOL);
  }
  return AOT_OK;
}

aot_status_t aot__code_info_check(const aot_model_t* m, const char* symbol, const char* entry,
                                  aot_error_t* err) {
  const void* p;
  uint64_t size;
  if (aot__code_object(&m->code, symbol, &p, &size, err))
    return aot__fail(err, AOT_ERR_UNSUPPORTED,
                     "code: no '%s' table of what it was built for (compiled by an older aot?); "
                     "recompile the model", symbol);
  if ((uintptr_t)p % sizeof(uint64_t) || size < HEAD_WORDS * sizeof(uint64_t))
    return aot__fail(err, AOT_ERR_FORMAT, "code: '%s' is not a code description (%" PRIu64
                     " bytes, or misaligned)", symbol, size);
  const uint64_t* w = (const uint64_t*)p;
  if (memcmp(w, AOT__CODE_INFO_MAGIC, 8) != 0)
    return aot__fail(err, AOT_ERR_FORMAT, "code: '%s' is not a code description (bad magic)",
                     symbol);
  if (w[W_VERSION] != AOT__CODE_INFO_VERSION && w[W_VERSION] != AOT__CODE_INFO_VERSION_DONATIONS)
    return aot__fail(err, AOT_ERR_UNSUPPORTED, "code: '%s' version %" PRIu64
                     " (this runtime reads %d and %d)", symbol, w[W_VERSION], AOT__CODE_INFO_VERSION,
                     AOT__CODE_INFO_VERSION_DONATIONS);
  aot_status_t st;
  /* counts first: they size the rest of the table */
  if (w[W_INPUTS] != m->input_count) return differs(err, "the input count", m->input_count, w[W_INPUTS]);
  if (w[W_OUTPUTS] != m->output_count)
    return differs(err, "the output count", m->output_count, w[W_OUTPUTS]);
  if (w[W_KERNELS] != m->kernel_count)
    return differs(err, "the kernel count", m->kernel_count, w[W_KERNELS]);
  if (w[W_CHECKS] != m->check_count) return differs(err, "the check count", m->check_count, w[W_CHECKS]);
  /* each count < 2^31 (manifest limits): no overflow */
  uint64_t words = HEAD_WORDS + (uint64_t)m->input_count + m->output_count + 2 * (uint64_t)m->kernel_count;
  if (size / sizeof(uint64_t) < words)
    return aot__fail(err, AOT_ERR_FORMAT, "code: '%s' is %" PRIu64 " bytes, its counts need %" PRIu64,
                     symbol, size, words * (uint64_t)sizeof(uint64_t));
  if (w[W_ARENA_BYTES] != m->arena_bytes) return differs(err, "arena.bytes", m->arena_bytes, w[W_ARENA_BYTES]);
  if (effective_align(w[W_ARENA_ALIGN]) != m->arena_align)
    return differs(err, "arena.alignment (at least 64)", m->arena_align, effective_align(w[W_ARENA_ALIGN]));
  if (w[W_WEIGHTS_BYTES] != m->weights_bytes)
    return differs(err, "weights.bytes", m->weights_bytes, w[W_WEIGHTS_BYTES]);
  if (effective_align(w[W_WEIGHTS_ALIGN]) != m->weights_align)
    return differs(err, "weights.alignment (at least 64)", m->weights_align,
                   effective_align(w[W_WEIGHTS_ALIGN]));
  if (w[W_ENTRY] != (uint64_t)(uintptr_t)m->entry)
    return aot__fail(err, AOT_ERR_FORMAT, "manifest: cpu entry '%s' is not the code's entry function (%s)",
                     entry, AOT__CODE_INFO_SYMBOL);
  if (w[W_CHECKS_FN] != (uint64_t)(uintptr_t)m->checks)
    return aot__fail(err, AOT_ERR_FORMAT, "manifest: the cpu entry's checks function is not the code's (%s)",
                     AOT__CODE_INFO_SYMBOL);
  const uint64_t* sizes = w + HEAD_WORDS;
  if ((st = check_tensors("inputs", m->inputs, m->input_count, sizes, err))) return st;
  if ((st = check_tensors("outputs", m->outputs, m->output_count, sizes + m->input_count, err))) return st;
  const uint64_t* k = sizes + m->input_count + m->output_count;
  for (uint32_t i = 0; i < m->kernel_count; i++, k += 2) {
    const aot__kernel_t* kernel = &m->kernels[i];
    if (k[0] != (uint64_t)(uintptr_t)kernel->fn)
      return aot__fail(err, AOT_ERR_FORMAT, "manifest: kernels[%u] ('%s'): its symbol is not the code's "
                       "kernel %u (%s)", i, m->kernel_names[i], i, AOT__CODE_INFO_SYMBOL);
    if (k[1] != (uint64_t)kernel->work)
      return aot__fail(err, AOT_ERR_FORMAT, "manifest: kernels[%u] ('%s'): work is %" PRId64
                       ", the code was built for %" PRIu64 " (%s)", i, m->kernel_names[i], kernel->work, k[1],
                       AOT__CODE_INFO_SYMBOL);
  }
  return check_donations(m, w[W_VERSION] == AOT__CODE_INFO_VERSION_DONATIONS ? k : NULL, size, words, symbol,
                         err);
}

/* libFuzzer harness: the container reader and the manifest JSON parser on
 * arbitrary bytes. Build with `make fuzz CC=clang`, run
 * `build/fuzz/fuzz_open -max_total_time=60`. */
#include <stddef.h>
#include <stdint.h>

#include "internal.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  aot_error_t err;
  if (size && (data[0] & 1)) {
    aot__json_doc_t* doc = NULL;
    const aot__json_t* root = NULL;
    if (aot__json_parse((const char*)data + 1, size - 1, &doc, &root, &err) == AOT_OK)
      aot__json_free(doc);
    return 0;
  }
  aot_model_t* m = NULL;
  if (aot_model_open_memory(data, size, &m, &err) == AOT_OK) aot_model_close(m);
  return 0;
}

/* kserve.h - the Open Inference Protocol (KServe v2) for one served model: its metadata and
 * Triton-style configuration as JSON, an inference request's body decoded into the model's
 * input tensors (JSON "data", flat or nested, or the binary tensor extension) and checked
 * against them, and the answer encoded from its outputs.
 *
 * The body is hostile: names, datatypes, shapes, element counts and values, and binary sizes
 * are all checked before a byte is copied; each refusal is a 400 naming what is wrong.
 *
 * Thread-safety: an aot_served_model_t is read-only after start-up and shared; a request
 * belongs to one thread. */
#ifndef AOT_SERVER_KSERVE_H_
#define AOT_SERVER_KSERVE_H_

#include <stdint.h>

#include "aot_runtime.h"
#include "http.h"

#define AOT_KSERVE_MAX_TENSORS 1024 /* inputs, and outputs, of a served model */
#define AOT_KSERVE_MAX_NAME 256     /* bytes of a tensor name in a request, with its NUL */

typedef struct aot_served_model {
  const char* name;
  aot_model_t* model;
  uint32_t n_in, n_out;
  aot_tensor_info_t* in;
  aot_tensor_info_t* out;
  uint64_t in_elements; /* of all inputs: bounds a valid request's JSON values */
} aot_served_model_t;

/* One inference request, decoded: the run's tensors (64-byte aligned buffers it owns) and
 * what the answer holds. */
typedef struct aot_kserve_request {
  aot_tensor_t in[AOT_KSERVE_MAX_TENSORS];
  aot_tensor_t out[AOT_KSERVE_MAX_TENSORS];
  int out_wanted[AOT_KSERVE_MAX_TENSORS]; /* 0: not returned; else 1 + its place in the answer */
  int out_binary[AOT_KSERVE_MAX_TENSORS]; /* returned as binary data, not JSON */
  char id[256];
  int has_id;
} aot_kserve_request_t;

/* "FP32", "INT64", ... (KServe's names); FP8 kinds have none in KServe: "FP8E4M3FN", ... */
const char* aot_kserve_dtype(aot_dtype_t dtype);

/* GET /v2/models/NAME: r becomes 200 with {name, versions, platform, inputs, outputs}. */
void aot_kserve_metadata(const aot_served_model_t* m, aot_http_response_t* r);
/* GET /v2/models/NAME/config: Triton's model configuration (max_batch_size 0, input, output). */
void aot_kserve_config(const aot_served_model_t* m, aot_http_response_t* r);

/* Decode POST .../infer's body[0, n) (its JSON the first header_len bytes when has_header_len,
 * Inference-Header-Content-Length; the inputs' binary data after it) into t: inputs filled,
 * outputs allocated. 0 on success; else -1 with r made the error answer, t freed. */
int aot_kserve_decode(const aot_served_model_t* m, const char* body, size_t n, int has_header_len,
                      uint64_t header_len, aot_kserve_request_t* t, aot_http_response_t* r);
/* r becomes the 200 answer to t once the model has run: JSON, then the binary outputs. */
void aot_kserve_encode(const aot_served_model_t* m, const aot_kserve_request_t* t,
                       aot_http_response_t* r);
/* Free t's tensor buffers (safe to call twice). */
void aot_kserve_request_free(const aot_served_model_t* m, aot_kserve_request_t* t);

#endif /* AOT_SERVER_KSERVE_H_ */

/* run_model - open an artifact, read each input from a raw file, run, write
 * each output to a raw file.
 *
 *   run_model MODEL.aot [-t THREADS] [-d cpu|cuda|cuda:N] [-i input.bin]... [-o output.bin]...
 *
 * -d cuda runs the artifact's GPU code on CUDA device 0 (cuda:N on device N); the runtime
 * copies the inputs to the device and the outputs back.
 * Inputs and outputs are given in manifest order; raw files hold the dense
 * row-major bytes of the tensor. Without -i/-o the program prints the
 * model's signature. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aot_runtime.h"

static void print_info(const char* kind, const aot_tensor_info_t* t) {
  printf("%s %s: %s[", kind, t->name, aot_dtype_name(t->dtype));
  for (uint32_t d = 0; d < t->rank; d++) printf("%s%lld", d ? "," : "", (long long)t->shape[d]);
  printf("] (%llu bytes)\n", (unsigned long long)t->byte_size);
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s MODEL.aot [-t THREADS] [-d cpu|cuda|cuda:N] [-i in.bin]... [-o out.bin]...\n",
            argv[0]);
    return 2;
  }
  const char* in_paths[64];
  const char* out_paths[64];
  uint32_t n_in = 0, n_out = 0, threads = 1, device = AOT_DEVICE_CPU;
  int32_t ordinal = 0;
  for (int a = 2; a + 1 < argc; a += 2) {
    if (strcmp(argv[a], "-i") == 0 && n_in < 64) in_paths[n_in++] = argv[a + 1];
    else if (strcmp(argv[a], "-o") == 0 && n_out < 64) out_paths[n_out++] = argv[a + 1];
    else if (strcmp(argv[a], "-t") == 0) threads = (uint32_t)strtoul(argv[a + 1], NULL, 10);
    else if (strcmp(argv[a], "-d") == 0 && strcmp(argv[a + 1], "cpu") == 0) device = AOT_DEVICE_CPU;
    else if (strcmp(argv[a], "-d") == 0 && strncmp(argv[a + 1], "cuda", 4) == 0 &&
             (argv[a + 1][4] == '\0' || argv[a + 1][4] == ':')) {
      device = AOT_DEVICE_CUDA;
      ordinal = argv[a + 1][4] ? (int32_t)strtol(argv[a + 1] + 5, NULL, 10) : 0;
    } else {
      fprintf(stderr, "unknown argument %s\n", argv[a]);
      return 2;
    }
  }
  aot_error_t err;
  aot_model_t* model = NULL;
  if (aot_model_open_file(argv[1], &model, &err) != AOT_OK) {
    fprintf(stderr, "error: %s\n", err.message);
    return 1;
  }
  uint32_t ni = aot_model_input_count(model), no = aot_model_output_count(model);
  aot_tensor_info_t info;
  if (n_in == 0 && n_out == 0) {
    printf("model %s\n", aot_model_name(model));
    const char* variant = aot_model_cpu_variant(model); /* "" for a GPU-only artifact */
    if (variant[0]) printf("cpu variant %s\n", variant);
    for (uint32_t i = 0; i < ni; i++)
      if (aot_model_input_info(model, i, &info, NULL) == AOT_OK) print_info("input", &info);
    for (uint32_t i = 0; i < no; i++)
      if (aot_model_output_info(model, i, &info, NULL) == AOT_OK) print_info("output", &info);
    aot_model_close(model);
    return 0;
  }
  int rc = 1;
  aot_tensor_t* ins = calloc(ni + 1, sizeof *ins);
  aot_tensor_t* outs = calloc(no + 1, sizeof *outs);
  aot_context_t* ctx = NULL;
  if (n_in != ni || n_out != no) {
    fprintf(stderr, "error: model has %u inputs and %u outputs, got %u -i and %u -o\n", ni, no,
            n_in, n_out);
    goto done;
  }
  for (uint32_t i = 0; i < ni; i++) {
    aot_model_input_info(model, i, &info, NULL);
    ins[i] = (aot_tensor_t){info.dtype, info.rank, info.shape, malloc(info.byte_size + 1),
                            info.byte_size};
    FILE* f = fopen(in_paths[i], "rb");
    size_t got = f ? fread(ins[i].data, 1, info.byte_size + 1, f) : 0;
    if (f) fclose(f);
    if (!f || got != info.byte_size) {
      fprintf(stderr, "error: input '%s' from %s: expected %llu bytes%s\n", info.name,
              in_paths[i], (unsigned long long)info.byte_size, f ? "" : " (cannot open)");
      goto done;
    }
  }
  for (uint32_t i = 0; i < no; i++) {
    aot_model_output_info(model, i, &info, NULL);
    outs[i] = (aot_tensor_t){info.dtype, info.rank, info.shape, malloc(info.byte_size + 1),
                             info.byte_size};
  }
  aot_context_options_t opt = {
      .struct_size = sizeof opt, .num_threads = threads, .device = device, .device_ordinal = ordinal};
  if (aot_context_create(model, &opt, &ctx, &err) != AOT_OK ||
      aot_run(ctx, ins, ni, outs, no, &err) != AOT_OK) {
    fprintf(stderr, "error: %s\n", err.message);
    goto done;
  }
  for (uint32_t i = 0; i < no; i++) {
    FILE* f = fopen(out_paths[i], "wb");
    if (!f || fwrite(outs[i].data, 1, outs[i].byte_size, f) != outs[i].byte_size) {
      fprintf(stderr, "error: cannot write %s\n", out_paths[i]);
      if (f) fclose(f);
      goto done;
    }
    fclose(f);
  }
  rc = 0;
done:
  aot_context_destroy(ctx);
  for (uint32_t i = 0; i < ni; i++) free(ins[i].data);
  for (uint32_t i = 0; i < no; i++) free(outs[i].data);
  free(ins);
  free(outs);
  aot_model_close(model);
  return rc;
}

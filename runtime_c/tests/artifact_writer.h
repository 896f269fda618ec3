/* A minimal .aot writer for the C tests (the real writer is aot/artifact.py). */
#ifndef AOT_TEST_ARTIFACT_WRITER_H_
#define AOT_TEST_ARTIFACT_WRITER_H_
#include <stddef.h>
#include <stdint.h>

typedef struct {
  const char* name;
  const void* data;
  size_t size;
  int zstd; /* 1: zstd frame with content size, 0: stored, 2: data is already such a frame
              (a decompression bomb, written without its raw bytes: tw_zstd_zeros) */
} tw_section_t;

/* Returns a malloc'ed artifact (manifest first, then sections) or NULL. */
uint8_t* tw_pack(const char* manifest_json, const tw_section_t* sections, size_t count,
                 size_t* out_size);
/* A malloc'ed zstd frame of n zero bytes that records its content size, or NULL. */
uint8_t* tw_zstd_zeros(uint64_t n, size_t* out_size);
/* Read a whole file; NULL on error. */
uint8_t* tw_read_file(const char* path, size_t* out_size);
int tw_write_file(const char* path, const void* data, size_t size);
#endif

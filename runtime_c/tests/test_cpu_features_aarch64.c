/* The aarch64 feature check (src/cpu_features_aarch64.c) against made-up hardware
 * capabilities, on any machine; on aarch64 also against this machine's own. */
#include <string.h>

#include "check.h"
#include "cpu_features_aarch64.h"

#define HWCAP_ASIMD (UINT64_C(1) << 1)
#define HWCAP_FPHP (UINT64_C(1) << 9)
#define HWCAP_ASIMDHP (UINT64_C(1) << 10)
#define HWCAP_ASIMDDP (UINT64_C(1) << 20)
#define HWCAP_SVE (UINT64_C(1) << 22)
#define HWCAP2_MOPS (UINT64_C(1) << 43)

/* lacking features of the cpu entry `json` under caps; -1 for an error, its message in why */
static long lacking(const char* json, uint64_t hwcap, uint64_t hwcap2, char* names, size_t size,
                    char* why) {
  aot__json_doc_t* doc = NULL;
  const aot__json_t* root = NULL;
  aot_error_t err;
  why[0] = '\0';
  if (aot__json_parse(json, strlen(json), &doc, &root, &err) != AOT_OK) {
    strcpy(why, err.message);
    return -1;
  }
  size_t count = 0;
  aot__aarch64_caps_t caps = {hwcap, hwcap2};
  aot_status_t st = aot__aarch64_lacking(root, caps, names, size, &count, &err);
  aot__json_free(doc);
  if (st != AOT_OK) {
    strcpy(why, err.message);
    return -1;
  }
  return (long)count;
}

int main(void) {
  char names[256], why[AOT_ERROR_MESSAGE_SIZE];
  CHECK(lacking("{\"arch\": \"aarch64\"}", 0, 0, names, sizeof names, why) == 0,
        "no list: nothing is checked (%s)", why);
  CHECK(lacking("{\"aarch64_features\": null}", 0, 0, names, sizeof names, why) == 0, "null: none");
  CHECK(lacking("{\"aarch64_features\": []}", 0, 0, names, sizeof names, why) == 0, "empty: none");

  const char* v1 = "{\"aarch64_features\": [\"fullfp16\", \"dotprod\", \"sve\"]}";
  uint64_t n1 = HWCAP_ASIMD | HWCAP_FPHP | HWCAP_ASIMDHP | HWCAP_ASIMDDP;
  CHECK(lacking(v1, n1, 0, names, sizeof names, why) == 1 && strcmp(names, "sve") == 0,
        "an N1 lacks SVE alone, got '%s'", names);
  CHECK(lacking(v1, n1 | HWCAP_SVE, 0, names, sizeof names, why) == 0 && names[0] == '\0',
        "with SVE nothing lacks, got '%s'", names);
  CHECK(lacking(v1, HWCAP_ASIMD | HWCAP_FPHP | HWCAP_ASIMDDP | HWCAP_SVE, 0, names, sizeof names,
                why) == 1 && strcmp(names, "fullfp16") == 0,
        "full fp16 needs the vector half-precision bit too, got '%s'", names);
  CHECK(lacking(v1, 0, 0, names, sizeof names, why) == 3 &&
            strcmp(names, "fullfp16, dotprod, sve") == 0,
        "every missing one named in order, got '%s'", names);
  CHECK(lacking("{\"aarch64_features\": [\"mops\"]}", 0, HWCAP2_MOPS, names, sizeof names, why) == 0,
        "bit 43 of AT_HWCAP2 is MOPS");
  CHECK(lacking("{\"aarch64_features\": [\"mops\"]}", HWCAP2_MOPS, 0, names, sizeof names, why) == 1,
        "MOPS is read from AT_HWCAP2, not AT_HWCAP");
  CHECK(lacking("{\"aarch64_features\": [\"sme\"]}", ~UINT64_C(0), ~UINT64_C(0), names, sizeof names,
                why) == 1 && strcmp(names, "sme (unknown to this runtime)") == 0,
        "an unknown name counts as lacking, got '%s'", names);
  CHECK(lacking(v1, 0, 0, names, 8, why) == 3 && strlen(names) < 8,
        "all counted, the names cut to fit, got '%s'", names);

  CHECK(lacking("{\"aarch64_features\": \"sve\"}", 0, 0, names, sizeof names, why) == -1 &&
            strstr(why, "must be an array"),
        "a string is no list: '%s'", why);
  CHECK(lacking("{\"aarch64_features\": [\"sve\", 3]}", 0, 0, names, sizeof names, why) == -1 &&
            strstr(why, "non-empty strings"),
        "a number is no name: '%s'", why);
  CHECK(lacking("{\"aarch64_features\": [\"\"]}", 0, 0, names, sizeof names, why) == -1,
        "an empty name is refused");

  aot__aarch64_caps_t mine = aot__aarch64_caps();
#if defined(__aarch64__) && defined(__linux__)
  CHECK(mine.hwcap & HWCAP_ASIMD, "every aarch64 Linux machine reports Advanced SIMD");
#else
  CHECK(mine.hwcap == 0 && mine.hwcap2 == 0, "no capabilities off aarch64");
#endif

  printf("test_cpu_features_aarch64: %d checks, %d failures\n", g_checks, g_failures);
  return g_failures != 0;
}

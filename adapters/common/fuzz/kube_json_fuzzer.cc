#include "common/fuzz/fuzz_entries.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  podium::fuzz::DecodeKubeJsonInput(data, size).IgnoreError();
  return 0;
}

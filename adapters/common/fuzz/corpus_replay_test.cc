// Replays the kept fuzz corpus through the loaders in every build (g++ too),
// so what a fuzz run once found stays fixed. A crash, an abort or an
// exception fails the test; a refusal must say what is wrong.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/fuzz/fuzz_entries.h"

namespace podium::fuzz {
namespace {

namespace fs = std::filesystem;

std::vector<fs::path> CorpusFiles(const std::string& name) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(fs::path(PODIUM_FUZZ_CORPUS_DIR) / name)) {
    if (entry.is_regular_file()) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string Read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

template <typename Entry>
void Replay(const std::string& name, Entry entry, size_t min_files) {
  const std::vector<fs::path> files = CorpusFiles(name);
  ASSERT_GE(files.size(), min_files) << "corpus " << name << " is missing files";
  for (const fs::path& file : files) {
    SCOPED_TRACE(file.string());
    const std::string data = Read(file);
    absl::Status s = entry(reinterpret_cast<const uint8_t*>(data.data()), data.size());
    if (!s.ok()) {
      EXPECT_FALSE(s.message().empty());
    }
  }
}

TEST(FuzzCorpusReplay, ClusterLoader) { Replay("cluster_loader", LoadClusterInput, 10); }

TEST(FuzzCorpusReplay, KubeJson) { Replay("kube_json", DecodeKubeJsonInput, 8); }

TEST(FuzzCorpusReplay, SchedulerConfig) { Replay("scheduler_config", ParseSchedulerConfigInput, 3); }

// The seeds that reproduce defects 15 and 16 are refused with a reason.
TEST(FuzzCorpusReplay, KnownBadClusterInputsAreRefused) {
  for (const char* seed : {"billion-laughs.yaml", "list-item-without-kind.yaml", "truncated-dump.yaml",
                           "invalid-utf8-name.yaml", "host-port-70000.yaml", "huge-cpu.yaml"}) {
    const std::string data = Read(fs::path(PODIUM_FUZZ_CORPUS_DIR) / "cluster_loader" / seed);
    ASSERT_FALSE(data.empty()) << seed;
    EXPECT_FALSE(LoadClusterInput(reinterpret_cast<const uint8_t*>(data.data()), data.size()).ok()) << seed;
  }
}

}  // namespace
}  // namespace podium::fuzz

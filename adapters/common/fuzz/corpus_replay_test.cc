// Replays the kept fuzz corpus through the loaders in every build (g++ too),
// so what a fuzz run once found stays fixed. A crash, an abort or an
// exception fails the test; a refusal must say what is wrong.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <string_view>
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

// Bytes a mutation inserts: mostly the ones YAML and JSON give meaning to.
constexpr std::string_view kStructural = "{}[]:,\"\n -&*!#";

// A short fuzz run in every build (g++ too): the kept corpus mutated at random
// (byte flips, inserts, deletes, duplicated and spliced ranges) with a fixed
// seed, through the same entry points as the libFuzzer targets. Not coverage
// guided (that is `make fuzz`, clang); it catches a crash, an abort, an
// exception or a refusal without a reason on inputs near the corpus.
template <typename Entry>
void MutationRun(const std::string& name, Entry entry, int iterations) {
  const std::vector<fs::path> files = CorpusFiles(name);
  ASSERT_FALSE(files.empty());
  std::vector<std::string> corpus;
  for (const fs::path& f : files) corpus.push_back(Read(f));
  std::mt19937_64 rng(0x5eed0000 + name.size());
  auto pick = [&](size_t n) { return n == 0 ? size_t{0} : std::uniform_int_distribution<size_t>(0, n - 1)(rng); };
  int accepted = 0;
  for (int i = 0; i < iterations; ++i) {
    std::string data = corpus[pick(corpus.size())];
    const int mutations = 1 + static_cast<int>(pick(8));
    for (int m = 0; m < mutations; ++m) {
      switch (pick(5)) {
        case 0:  // Flip a byte.
          if (!data.empty()) data[pick(data.size())] ^= static_cast<char>(1 + pick(255));
          break;
        case 1:  // Insert a byte, often a structural one.
          data.insert(data.begin() + static_cast<std::ptrdiff_t>(pick(data.size() + 1)),
                      kStructural[pick(kStructural.size())]);
          break;
        case 2:  // Delete a range.
          if (!data.empty()) {
            const size_t at = pick(data.size());
            data.erase(at, 1 + pick(std::min<size_t>(64, data.size() - at)));
          }
          break;
        case 3:  // Duplicate a range.
          if (!data.empty()) {
            const size_t at = pick(data.size());
            const std::string range = data.substr(at, 1 + pick(64));
            data.insert(pick(data.size() + 1), range);
          }
          break;
        default: {  // Splice in a range of another input.
          const std::string& other = corpus[pick(corpus.size())];
          if (!other.empty()) data.insert(pick(data.size() + 1), other.substr(pick(other.size()), 1 + pick(256)));
        }
      }
    }
    SCOPED_TRACE(testing::Message() << name << " iteration " << i);
    absl::Status s = entry(reinterpret_cast<const uint8_t*>(data.data()), data.size());
    if (!s.ok()) {
      ASSERT_FALSE(s.message().empty()) << "a refusal without a reason for input:\n" << data;
    } else {
      ++accepted;
    }
  }
  // The run reaches past the parsers: some mutated inputs still load (about
  // 0.5 % of the scheduler configs, which refuse any unknown field).
  EXPECT_GT(accepted, 0) << "no mutated input was accepted";
}

TEST(FuzzShortRun, ClusterLoader) { MutationRun("cluster_loader", LoadClusterInput, 20000); }

TEST(FuzzShortRun, KubeJson) { MutationRun("kube_json", DecodeKubeJsonInput, 20000); }

TEST(FuzzShortRun, SchedulerConfig) { MutationRun("scheduler_config", ParseSchedulerConfigInput, 20000); }

}  // namespace
}  // namespace podium::fuzz

// Loading YAML (or JSON) from outside with bounds: input size, nodes after
// alias expansion (a 1 KB "billion laughs" expands to 10^9 nodes when walked),
// and UTF-8 text. Every error names the source, the document and the line.
// Used by podium-sim's cluster loader and the scheduler's --config loader.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "yaml-cpp/yaml.h"

namespace podium::yaml {

struct YamlLimits {
  size_t max_bytes = size_t{256} << 20;  // Of one source.
  // Nodes of one source, counting each alias as the nodes it stands for.
  uint64_t max_nodes = 20'000'000;
  // Aliases may add at most this many times the nodes written out (plus
  // 10 000): real manifests and configs barely use aliases; amplification
  // attacks exist only through them.
  uint64_t max_alias_expansion = 4;
};

// Parses every document of `text`. Errors read
// "NAME: document N: line L, column C: problem". Nothing is thrown.
absl::StatusOr<std::vector<YAML::Node>> LoadAllDocuments(const std::string& name, std::string_view text,
                                                         const YamlLimits& limits = {});

// Reads a whole file, refusing one larger than max_bytes before reading it.
absl::StatusOr<std::string> ReadFileBounded(const std::string& path, size_t max_bytes);

}  // namespace podium::yaml

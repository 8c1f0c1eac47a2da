#include "common/yaml/safe_yaml.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/validation/object_validation.h"
#include "yaml-cpp/eventhandler.h"

namespace podium::yaml {
namespace {

constexpr uint64_t kAliasAllowance = 10'000;

struct Refusal {
  YAML::Mark mark;
  std::string message;
};

// Walks the parser's events once, before any node is built: counts nodes as
// the tree would hold them after alias expansion, and checks that scalars are
// UTF-8. Sizes of anchored subtrees are remembered so an alias costs its size.
// A mapping key written twice is refused (kubectl's and kube-scheduler's
// strict decoding: "mapping key already defined"; yaml-cpp would keep one of
// them, the first or the last depending on how it is read), and so is a
// merge key (<<), which yaml-cpp does not implement: it would be dropped.
class BoundsCheck final : public YAML::EventHandler {
 public:
  explicit BoundsCheck(const YamlLimits& limits) : limits_(limits) {}

  void OnDocumentStart(const YAML::Mark&) override {
    anchors_.clear();
    open_.clear();
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    Child(mark, nullptr, false);
    Leaf(mark, anchor);
  }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    Child(mark, nullptr, false);
    auto it = anchors_.find(anchor);
    const uint64_t size = it == anchors_.end() ? 1 : it->second;
    expanded_ += size;
    Check(mark);
  }
  void OnScalar(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                const std::string& value) override {
    if (!validation::IsValidUtf8(value)) throw Refusal{mark, "text is not valid UTF-8"};
    Child(mark, &value, tag == "?");  // "?": plain (not quoted).
    Leaf(mark, anchor);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor, YAML::EmitterStyle::value) override {
    Child(mark, nullptr, false);
    Open(mark, anchor, false);
  }
  void OnSequenceEnd() override { Close(); }
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor, YAML::EmitterStyle::value) override {
    Child(mark, nullptr, false);
    Open(mark, anchor, true);
  }
  void OnMapEnd() override { Close(); }

 private:
  void Leaf(const YAML::Mark& mark, YAML::anchor_t anchor) {
    ++written_;
    ++expanded_;
    if (anchor != YAML::NullAnchor) anchors_[anchor] = 1;
    Check(mark);
  }
  void Open(const YAML::Mark& mark, YAML::anchor_t anchor, bool map) {
    ++written_;
    ++expanded_;
    open_.push_back({anchor, expanded_ - 1, map});
    Check(mark);
  }
  void Close() {
    if (open_.empty()) return;
    const Container& c = open_.back();
    if (c.anchor != YAML::NullAnchor) anchors_[c.anchor] = expanded_ - c.start;
    open_.pop_back();
  }
  // A node written into the innermost open container: in a mapping, every
  // other one is a key. `key` is the scalar's text (null for any other node).
  void Child(const YAML::Mark& mark, const std::string* key, bool plain) {
    if (open_.empty() || !open_.back().map) return;
    Container& c = open_.back();
    if (c.children++ % 2 != 0 || key == nullptr) return;  // A value, or a key that is no scalar.
    if (plain && *key == "<<") throw Refusal{mark, "merge keys (<<) are not supported; write the keys out"};
    if (!c.keys.insert(*key).second) {
      throw Refusal{mark, absl::StrCat("mapping key \"", validation::Printable(*key), "\" already defined")};
    }
  }
  void Check(const YAML::Mark& mark) {
    if (expanded_ > limits_.max_nodes) {
      throw Refusal{mark, absl::StrCat("more than ", limits_.max_nodes, " nodes (counting what aliases repeat)")};
    }
    const uint64_t allowed = written_ * limits_.max_alias_expansion + kAliasAllowance;
    if (expanded_ > allowed) {
      throw Refusal{mark, absl::StrCat("aliases expand ", written_, " written nodes to more than ", allowed,
                                       " (YAML alias amplification)")};
    }
  }

  const YamlLimits& limits_;
  uint64_t written_ = 0;   // Nodes as written.
  uint64_t expanded_ = 0;  // Nodes with every alias expanded.
  std::unordered_map<YAML::anchor_t, uint64_t> anchors_;  // Of the current document.
  struct Container {
    YAML::anchor_t anchor;
    uint64_t start;
    bool map;
    uint64_t children = 0;
    std::unordered_set<std::string> keys;  // A mapping's scalar keys.
  };
  std::vector<Container> open_;
};

std::string Where(const std::string& name, size_t document, const YAML::Mark& mark) {
  std::string where = absl::StrCat(name, ": document ", document);
  if (mark.line >= 0) absl::StrAppendFormat(&where, ": line %d, column %d", mark.line + 1, mark.column + 1);
  return where;
}

}  // namespace

absl::StatusOr<std::vector<YAML::Node>> LoadAllDocuments(const std::string& name, std::string_view text,
                                                         const YamlLimits& limits) {
  if (text.size() > limits.max_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": ", text.size(), " bytes, more than the limit of ", limits.max_bytes));
  }
  const std::string copy(text);
  // The bounds, first, on the event stream: nothing is built yet.
  size_t document = 1;
  try {
    std::istringstream in(copy);
    YAML::Parser parser(in);
    BoundsCheck check(limits);
    while (parser.HandleNextDocument(check)) ++document;
  } catch (const Refusal& r) {
    return absl::InvalidArgumentError(absl::StrCat(Where(name, document, r.mark), ": ", r.message));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(Where(name, document, e.mark), ": invalid YAML: ", e.msg));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": document ", document, ": invalid YAML: ", e.what()));
  }
  try {
    return YAML::LoadAll(copy);
  } catch (const YAML::Exception& e) {  // Not expected: the same text parsed above.
    return absl::InvalidArgumentError(absl::StrCat(Where(name, document, e.mark), ": invalid YAML: ", e.msg));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": invalid YAML: ", e.what()));
  }
}

absl::StatusOr<std::string> ReadFileBounded(const std::string& path, size_t max_bytes) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) return absl::NotFoundError(absl::StrCat(path, ": cannot read: ", ec.message()));
  if (size > max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", size, " bytes, more than the limit of ", max_bytes));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot read"));
  std::string text;
  text.resize(size);
  in.read(text.data(), static_cast<std::streamsize>(size));
  text.resize(static_cast<size_t>(in.gcount()));
  return text;
}

}  // namespace podium::yaml

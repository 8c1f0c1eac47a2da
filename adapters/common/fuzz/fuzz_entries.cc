#include "common/fuzz/fuzz_entries.h"

#include <string>

#include "common/translate/k8s_yaml.h"
#include "absl/strings/str_split.h"
#include "client/fake_transport.h"
#include "config/config.h"
#include "reflector/reflector.h"
#include "reflector/resource_kind.h"

namespace podium::fuzz {

absl::Status LoadClusterInput(const uint8_t* data, size_t size) {
  k8s::LoadOptions options;
  options.default_creation_time = absl::FromUnixSeconds(1700000000);
  // Smaller than podium-sim's bounds, so a fuzz run stays fast.
  options.yaml_limits.max_bytes = 1 << 20;
  options.yaml_limits.max_nodes = 200'000;
  auto cluster = k8s::LoadCluster({{"fuzz.yaml", std::string(reinterpret_cast<const char*>(data), size)}}, options);
  return cluster.status();
}

absl::Status ParseSchedulerConfigInput(const uint8_t* data, size_t size) {
  auto config = scheduler::ParseConfig(std::string_view(reinterpret_cast<const char*>(data), size));
  return config.status();
}

namespace {

// Checks what the reflector hands on: the kind it lists, with a name.
class CheckingSink : public kube::ReflectorSink {
 public:
  void OnListPage(const kube::ResourceKind& kind, std::vector<v1::ObjectEvent> events) override {
    Check(kind, events);
  }
  void OnListPartDone(const kube::ResourceKind&, size_t) override {}
  void OnEvents(const kube::ResourceKind& kind, std::vector<v1::ObjectEvent> events) override { Check(kind, events); }
  void OnBadObject(const kube::ResourceKind& kind, const boost::json::value& object, const absl::Status& error) override {
    if (error.ok() || error.message().empty()) std::abort();  // A refusal must say why.
    (void)kube::ObjectKey(object);
  }

 private:
  static void Check(const kube::ResourceKind& kind, const std::vector<v1::ObjectEvent>& events) {
    for (const v1::ObjectEvent& e : events) {
      if (e.type() != v1::ObjectEvent::UPSERT && e.type() != v1::ObjectEvent::DELETE) std::abort();
      const v1::ObjectMeta* meta = nullptr;
      if (kind.kind == "Node" && e.has_node()) meta = &e.node().meta();
      if (kind.kind == "Pod" && e.has_pod()) meta = &e.pod().meta();
      if (kind.kind == "PodDisruptionBudget" && e.has_pdb()) meta = &e.pdb().meta();
      if (kind.kind == "PriorityClass" && e.has_priority_class()) meta = &e.priority_class().meta();
      if (kind.kind == "Namespace" && e.has_namespace_object()) meta = &e.namespace_object().meta();
      if ((kind.kind.starts_with("PodGroup.") || kind.kind.starts_with("Workload.")) && e.has_pod_group()) {
        meta = &e.pod_group().meta();
      }
      if (meta == nullptr || meta->name().empty()) std::abort();
    }
  }
};

}  // namespace

absl::Status DecodeKubeJsonInput(const uint8_t* data, size_t size) {
  const std::string body(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> lines = absl::StrSplit(body, '\n');
  absl::Status first_error;
  for (const kube::ResourceKind& kind : kube::AllKinds()) {
    kube::FakeTransport transport;
    // Every list page (a "continue" in the input pages on, up to this many).
    for (int i = 0; i < 8; ++i) transport.answers.push_back({.status = 200, .body = body});
    transport.watches.push_back({.lines = lines});
    CheckingSink sink;
    kube::Reflector reflector(kind, transport, sink, {.page_size = 2}, [] { return absl::UnixEpoch(); },
                              [](absl::Duration) {}, [] { return 0.0; });
    absl::Status s = reflector.ListAndSync();
    if (s.ok() && reflector.synced()) {
      absl::Status watch_error;
      (void)reflector.Watch(&watch_error);
    }
    if (!s.ok() && first_error.ok()) first_error = s;
  }
  return first_error;
}

}  // namespace podium::fuzz

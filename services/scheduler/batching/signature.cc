#include "batching/signature.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"

namespace podium::scheduler::batching {
namespace {

// The cycle phases a batch reuses: a plugin at any of them must sign.
constexpr v1::ExtensionPoint kSignedPoints[] = {v1::PRE_FILTER, v1::FILTER, v1::PRE_SCORE,
                                                v1::SCORE};

void AppendBytes(std::string_view bytes, std::string& out) {
  const uint32_t n = static_cast<uint32_t>(bytes.size());
  out.append(reinterpret_cast<const char*>(&n), sizeof(n));
  out.append(bytes);
}

void AppendMessage(const google::protobuf::MessageLite& m, std::string& out) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);  // Map fields in key order.
    m.SerializeToCodedStream(&coded);
  }
  AppendBytes(bytes, out);
}

void AppendInt(int64_t v, std::string& out) { out.append(reinterpret_cast<const char*>(&v), sizeof(v)); }

void AppendStringMap(const google::protobuf::Map<std::string, std::string>& m, std::string& out) {
  std::vector<std::pair<std::string_view, std::string_view>> sorted(m.begin(), m.end());
  std::sort(sorted.begin(), sorted.end());
  AppendInt(static_cast<int64_t>(sorted.size()), out);
  for (const auto& [k, v] : sorted) {
    AppendBytes(k, out);
    AppendBytes(v, out);
  }
}

template <typename F>
void ForEachContainer(const v1::Pod& pod, F f) {
  for (const auto& c : pod.containers()) f(c, false);
  for (const auto& c : pod.init_containers()) f(c, true);
}

}  // namespace

std::string_view PodPartField(v1::PodPart part) {
  switch (part) {
    case v1::POD_PART_RESOURCES: return "resources";
    case v1::POD_PART_NODE_SELECTOR: return "nodeSelector";
    case v1::POD_PART_NODE_AFFINITY: return "affinity.nodeAffinity";
    case v1::POD_PART_TOLERATIONS: return "tolerations";
    case v1::POD_PART_HOST_PORTS: return "hostPort";
    case v1::POD_PART_IMAGES: return "image";
    case v1::POD_PART_NODE_NAME: return "nodeName";
    case v1::POD_PART_LABELS: return "labels";
    case v1::POD_PART_NAMESPACE: return "namespace";
    case v1::POD_PART_TOPOLOGY_SPREAD: return "topologySpreadConstraints";
    case v1::POD_PART_INTER_POD_AFFINITY: return "affinity.podAffinity/podAntiAffinity";
    case v1::POD_PART_OWNER_REFERENCES: return "ownerReferences";
    case v1::POD_PART_PRIORITY: return "priority";
    case v1::POD_PART_GROUP: return "podGroup";
    default: return "unknown part";
  }
}

void AppendPodPart(const v1::Pod& pod, v1::PodPart part, std::string& out) {
  AppendInt(part, out);
  switch (part) {
    case v1::POD_PART_RESOURCES:
      ForEachContainer(pod, [&](const v1::Container& c, bool init) {
        AppendInt(init ? (c.restartable() ? 2 : 1) : 0, out);
        AppendMessage(c.requests(), out);
      });
      AppendMessage(pod.overhead(), out);
      AppendBytes(pod.resize_status(), out);
      AppendMessage(pod.allocated(), out);
      break;
    case v1::POD_PART_NODE_SELECTOR: AppendStringMap(pod.node_selector(), out); break;
    case v1::POD_PART_NODE_AFFINITY: AppendMessage(pod.affinity().node_affinity(), out); break;
    case v1::POD_PART_TOLERATIONS:
      AppendInt(pod.tolerations_size(), out);
      for (const auto& t : pod.tolerations()) AppendMessage(t, out);
      break;
    case v1::POD_PART_HOST_PORTS:
      ForEachContainer(pod, [&](const v1::Container& c, bool init) {
        for (const auto& p : c.ports()) {
          if (p.host_port() != 0) AppendMessage(p, out);
        }
      });
      break;
    case v1::POD_PART_IMAGES:
      ForEachContainer(pod, [&](const v1::Container& c, bool init) {
        AppendInt(init, out);
        AppendBytes(c.image(), out);
      });
      break;
    case v1::POD_PART_NODE_NAME: AppendBytes(pod.node_name(), out); break;
    case v1::POD_PART_LABELS: AppendStringMap(pod.meta().labels(), out); break;
    case v1::POD_PART_NAMESPACE: AppendBytes(pod.meta().namespace_(), out); break;
    case v1::POD_PART_TOPOLOGY_SPREAD:
      AppendInt(pod.topology_spread_constraints_size(), out);
      for (const auto& c : pod.topology_spread_constraints()) AppendMessage(c, out);
      break;
    case v1::POD_PART_INTER_POD_AFFINITY:
      AppendMessage(pod.affinity().pod_affinity(), out);
      AppendMessage(pod.affinity().pod_anti_affinity(), out);
      break;
    case v1::POD_PART_OWNER_REFERENCES:
      AppendInt(pod.meta().owner_references_size(), out);
      for (const auto& o : pod.meta().owner_references()) AppendMessage(o, out);
      break;
    case v1::POD_PART_PRIORITY: AppendInt(pod.priority(), out); break;
    case v1::POD_PART_GROUP: AppendBytes(pod.pod_group(), out); break;
    default: break;
  }
}

bool PodSetsPart(const v1::Pod& pod, v1::PodPart part) {
  switch (part) {
    case v1::POD_PART_TOPOLOGY_SPREAD: return pod.topology_spread_constraints_size() > 0;
    case v1::POD_PART_INTER_POD_AFFINITY:
      return pod.affinity().pod_affinity().ByteSizeLong() > 0 ||
             pod.affinity().pod_anti_affinity().ByteSizeLong() > 0;
    case v1::POD_PART_OWNER_REFERENCES: return pod.meta().owner_references_size() > 0;
    case v1::POD_PART_NODE_SELECTOR: return !pod.node_selector().empty();
    case v1::POD_PART_NODE_AFFINITY: return pod.affinity().node_affinity().ByteSizeLong() > 0;
    case v1::POD_PART_TOLERATIONS: return pod.tolerations_size() > 0;
    case v1::POD_PART_NODE_NAME: return !pod.node_name().empty();
    case v1::POD_PART_LABELS: return !pod.meta().labels().empty();
    case v1::POD_PART_GROUP: return !pod.pod_group().empty();
    default: {
      std::string bytes;
      AppendPodPart(pod, part, bytes);
      // Only the part tag: nothing set. Otherwise compare with an empty pod.
      std::string empty;
      AppendPodPart(v1::Pod::default_instance(), part, empty);
      return bytes != empty;
    }
  }
}

Signer Signer::Unsignable(std::string reason) {
  Signer s;
  s.profile_unsignable_ = std::move(reason);
  return s;
}

Signer Signer::ForProfile(const ProfileSpec& spec,
                          const absl::flat_hash_map<std::string, v1::PluginRegistration>& registrations) {
  Signer s;
  absl::flat_hash_set<std::string> seen;
  // Per part: whether every plugin listing it reads it only through affinity terms.
  absl::flat_hash_map<int, bool> through_terms;
  for (v1::ExtensionPoint point : kSignedPoints) {
    auto it = spec.plugins.find(point);
    if (it == spec.plugins.end()) continue;
    for (const PluginRef& ref : it->second) {
      if (point == v1::SCORE) s.weights_[ref.name] = ref.weight > 0 ? ref.weight : 1;
      if (!spec.processes.contains(ref.name)) continue;  // Built in: none at these points.
      if (!seen.insert(ref.name).second) continue;
      auto reg = registrations.find(ref.name);
      if (reg == registrations.end()) {
        if (s.profile_unsignable_.empty()) {
          s.profile_unsignable_ = absl::StrCat("plugin ", ref.name, " has not registered");
        }
        continue;
      }
      if (!reg->second.has_signature()) {
        if (s.profile_unsignable_.empty()) {
          s.profile_unsignable_ = absl::StrCat("plugin ", ref.name, " does not sign pods");
        }
        continue;
      }
      const v1::SignatureSpec& sig = reg->second.signature();
      const absl::flat_hash_set<int> conditional(sig.parts_read_through_affinity_terms().begin(),
                                                 sig.parts_read_through_affinity_terms().end());
      for (int part : sig.parts()) {
        s.parts_.push_back(static_cast<v1::PodPart>(part));
        auto [it, inserted] = through_terms.try_emplace(part, conditional.contains(part));
        if (!inserted) it->second = it->second && conditional.contains(part);
      }
      for (int part : sig.unsignable_when_set()) {
        s.unsignable_when_set_.emplace_back(static_cast<v1::PodPart>(part), ref.name);
      }
      if (sig.normalizes_scores()) s.normalizing_.insert(ref.name);
    }
  }
  // Priority always: which nominated pods a cycle counts, and preemption, depend on it.
  s.parts_.push_back(v1::POD_PART_PRIORITY);
  std::sort(s.parts_.begin(), s.parts_.end());
  s.parts_.erase(std::unique(s.parts_.begin(), s.parts_.end()), s.parts_.end());
  for (const auto& [part, only_through_terms] : through_terms) {
    if (only_through_terms) s.through_terms_.insert(part);
  }
  return s;
}

int64_t Signer::Weight(const std::string& plugin) const {
  auto it = weights_.find(plugin);
  return it == weights_.end() ? 1 : it->second;
}

PodSignature Signer::Sign(const v1::Pod& pod, bool affinity_terms_exist) const {
  PodSignature sig;
  if (!profile_unsignable_.empty()) {
    sig.unsignable_reason = profile_unsignable_;
    return sig;
  }
  for (const auto& [part, plugin] : unsignable_when_set_) {
    if (PodSetsPart(pod, part)) {
      sig.unsignable_reason = absl::StrCat(plugin, ": the pod sets ", std::string(PodPartField(part)));
      return sig;
    }
  }
  sig.signable = true;
  sig.key.reserve(128);
  bool left_out = false;
  for (v1::PodPart part : parts_) {
    if (!affinity_terms_exist && through_terms_.contains(part)) {
      left_out = true;
      continue;
    }
    AppendPodPart(pod, part, sig.key);
  }
  // Never equal to a key with those parts in it.
  static constexpr char kWithoutTerms[] = "\0without-affinity-terms";
  if (left_out) sig.key.append(kWithoutTerms, sizeof(kWithoutTerms) - 1);
  return sig;
}

}  // namespace podium::scheduler::batching

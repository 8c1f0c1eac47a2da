#include "common/validation/object_validation.h"

#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace podium::validation {
namespace {

// Abseil here is built with its own string_view type.
absl::string_view AV(std::string_view s) { return absl::string_view(s.data(), s.size()); }

absl::Status Invalid(std::string_view field, std::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat(AV(field), ": ", AV(problem)));
}

// Length of the UTF-8 sequence at s[i], or 0 when it is not valid UTF-8
// (overlongs, surrogates and code points beyond U+10FFFF included).
size_t Utf8SequenceLength(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  if (c < 0x80) return 1;
  size_t n;
  uint32_t cp;
  if ((c & 0xE0) == 0xC0) {
    n = 2, cp = c & 0x1F;
  } else if ((c & 0xF0) == 0xE0) {
    n = 3, cp = c & 0x0F;
  } else if ((c & 0xF8) == 0xF0) {
    n = 4, cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b(i + k) & 0x3F);
  }
  static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

bool IsControl(std::string_view s, size_t i, size_t len) {
  const auto c = static_cast<unsigned char>(s[i]);
  if (len == 1) return c < 0x20 || c == 0x7F;
  // C1 controls U+0080..U+009F (C2 80..C2 9F), U+2028/U+2029 line separators.
  if (len == 2) return c == 0xC2 && static_cast<unsigned char>(s[i + 1]) < 0xA0;
  if (len == 3) return s.substr(i, 3) == "\xE2\x80\xA8" || s.substr(i, 3) == "\xE2\x80\xA9";
  return false;
}

absl::Status ValidateMeta(const v1::ObjectMeta& meta, bool namespaced) {
  if (auto s = ValidateName(meta.name(), "metadata.name", kMaxNameLength); !s.ok()) return s;
  if (auto s = ValidateName(meta.uid(), "metadata.uid", kMaxUidLength); !s.ok()) return s;
  if (namespaced) {
    if (auto s = ValidateName(meta.namespace_(), "metadata.namespace", kMaxNamespaceLength); !s.ok()) return s;
  }
  return absl::OkStatus();
}

// The checks below take the field's path as a function called only when an
// error names it: every pod event is validated, and building each path
// ("spec.containers[0].resources.requests.cpu", ...) up front was most of
// the cost of validating a valid pod.

template <typename Path>
absl::Status CheckName(std::string_view value, const Path& path, size_t max_length, bool required) {
  if (value.empty()) return required ? Invalid(path(), "required") : absl::OkStatus();
  if (value.size() > max_length) {
    return Invalid(path(), absl::StrCat("must be at most ", max_length, " bytes, got ", value.size()));
  }
  for (size_t i = 0; i < value.size();) {
    const size_t len = Utf8SequenceLength(value, i);
    if (len == 0) return Invalid(path(), absl::StrCat("invalid UTF-8 at byte ", i, ": \"", Printable(value), "\""));
    if (IsControl(value, i, len)) {
      return Invalid(path(), absl::StrCat("control character at byte ", i, ": \"", Printable(value), "\""));
    }
    i += len;
  }
  return absl::OkStatus();
}

template <typename Path>
absl::Status CheckQuantity(int64_t value, const Path& path, std::string_view leaf) {
  if (value < 0) return Invalid(absl::StrCat(path(), AV(leaf)), "must be non-negative");
  if (value > kMaxQuantity) {
    return Invalid(absl::StrCat(path(), AV(leaf)), absl::StrCat("must be at most 2^53 (", kMaxQuantity, ")"));
  }
  return absl::OkStatus();
}

template <typename Path>
absl::Status CheckResources(const v1::ResourceList& list, const Path& path) {
  if (auto s = CheckQuantity(list.milli_cpu(), path, ".cpu"); !s.ok()) return s;
  if (auto s = CheckQuantity(list.memory_bytes(), path, ".memory"); !s.ok()) return s;
  if (auto s = CheckQuantity(list.ephemeral_storage_bytes(), path, ".ephemeral-storage"); !s.ok()) return s;
  if (auto s = CheckQuantity(list.pods(), path, ".pods"); !s.ok()) return s;
  for (const auto& [name, value] : list.scalar()) {
    const auto name_path = [&] { return absl::StrCat(path(), " resource name"); };
    if (auto s = CheckName(name, name_path, kMaxNameLength, true); !s.ok()) return s;
    const auto value_path = [&] { return absl::StrCat(path(), ".", name); };
    if (auto s = CheckQuantity(value, value_path, ""); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status ValidateContainers(const google::protobuf::RepeatedPtrField<v1::Container>& containers,
                                std::string_view field) {
  for (int i = 0; i < containers.size(); ++i) {
    const auto prefix = [&] { return absl::StrCat(AV(field), "[", i, "]"); };
    const auto requests = [&] { return absl::StrCat(prefix(), ".resources.requests"); };
    if (auto s = CheckResources(containers[i].requests(), requests); !s.ok()) return s;
    const auto limits = [&] { return absl::StrCat(prefix(), ".resources.limits"); };
    if (auto s = CheckResources(containers[i].limits(), limits); !s.ok()) return s;
    for (int p = 0; p < containers[i].ports_size(); ++p) {
      const auto& port = containers[i].ports(p);
      if (port.host_port() < 0 || port.host_port() > 65535) {
        return Invalid(absl::StrCat(prefix(), ".ports[", p, "].hostPort"), "must be between 0 and 65535");
      }
      if (port.container_port() < 0 || port.container_port() > 65535) {
        return Invalid(absl::StrCat(prefix(), ".ports[", p, "].containerPort"), "must be between 0 and 65535");
      }
    }
  }
  return absl::OkStatus();
}

// Kubernetes' container resource names: cpu, memory, ephemeral-storage,
// hugepages-*, or a qualified extended resource (with a '/'); "pods" or "gpu"
// is a typo the scheduler would otherwise count as a resource.
absl::Status ValidateContainerResourceNames(const google::protobuf::RepeatedPtrField<v1::Container>& containers,
                                            std::string_view field) {
  for (int i = 0; i < containers.size(); ++i) {
    for (const bool is_requests : {true, false}) {
      const v1::ResourceList& list = is_requests ? containers[i].requests() : containers[i].limits();
      const std::string path =
          absl::StrCat(AV(field), "[", i, "].resources.", is_requests ? "requests" : "limits");
      if (list.pods() != 0) {
        return Invalid(absl::StrCat(path, "[pods]"), "must be a standard resource type or fully qualified");
      }
      for (const auto& [name, value] : list.scalar()) {
        if (name.find('/') == std::string::npos && name.rfind("hugepages-", 0) != 0) {
          return Invalid(absl::StrCat(path, "[", Printable(name), "]"),
                         "must be a standard resource type or fully qualified");
        }
      }
    }
  }
  return absl::OkStatus();
}

// Kubernetes' ValidateResourceRequirements: a request above its limit.
absl::Status ValidateRequestsWithinLimits(const google::protobuf::RepeatedPtrField<v1::Container>& containers,
                                          std::string_view field) {
  for (int i = 0; i < containers.size(); ++i) {
    const v1::ResourceList& req = containers[i].requests();
    const v1::ResourceList& lim = containers[i].limits();
    const auto where = [&](std::string_view name) {
      return absl::StrCat(AV(field), "[", i, "].resources.requests[", AV(name), "]");
    };
    const auto above = [&](std::string_view name) {
      return Invalid(where(name), absl::StrCat("must be less than or equal to ", AV(name), " limit"));
    };
    if (lim.milli_cpu() > 0 && req.milli_cpu() > lim.milli_cpu()) return above("cpu");
    if (lim.memory_bytes() > 0 && req.memory_bytes() > lim.memory_bytes()) return above("memory");
    for (const auto& [name, value] : req.scalar()) {
      auto it = lim.scalar().find(name);
      if (it != lim.scalar().end() && value > it->second) return above(name);
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateNodeSelectorTerm(const v1::NodeSelectorTerm& term, const std::string& where) {
  auto check = [&](const google::protobuf::RepeatedPtrField<v1::NodeSelectorRequirement>& reqs,
                   const std::string& list) -> absl::Status {
    for (int i = 0; i < reqs.size(); ++i) {
      const auto& r = reqs[i];
      const std::string at = absl::StrCat(where, ".", list, "[", i, "]");
      if (r.key().empty()) return Invalid(at + ".key", "must not be empty");
      switch (r.operator_()) {
        case v1::NodeSelectorRequirement::IN:
        case v1::NodeSelectorRequirement::NOT_IN:
          if (r.values().empty()) return Invalid(at + ".values", "must be specified when `operator` is 'In' or 'NotIn'");
          break;
        case v1::NodeSelectorRequirement::EXISTS:
        case v1::NodeSelectorRequirement::DOES_NOT_EXIST:
          if (!r.values().empty()) {
            return Invalid(at + ".values", "may not be specified when `operator` is 'Exists' or 'DoesNotExist'");
          }
          break;
        case v1::NodeSelectorRequirement::GT:
        case v1::NodeSelectorRequirement::LT: {
          int64_t n = 0;
          if (r.values_size() != 1) return Invalid(at + ".values", "must be specified single value when `operator` is 'Lt' or 'Gt'");
          if (!absl::SimpleAtoi(r.values(0), &n)) {
            return Invalid(at + ".values[0]", absl::StrCat("must be an integer, got \"", Printable(r.values(0)), "\""));
          }
          break;
        }
        default: return Invalid(at + ".operator", "not a valid selector operator");
      }
    }
    return absl::OkStatus();
  };
  if (auto s = check(term.match_expressions(), "matchExpressions"); !s.ok()) return s;
  return check(term.match_fields(), "matchFields");
}

// A preferred term's weight: 1-100, as Kubernetes validates it.
absl::Status ValidateWeight(int32_t weight, const std::string& where) {
  if (weight < 1 || weight > 100) return Invalid(where + ".weight", "must be in the range 1-100");
  return absl::OkStatus();
}

absl::Status ValidatePodAffinityTerm(const v1::PodAffinityTerm& term, const std::string& where) {
  if (term.topology_key().empty()) return Invalid(where + ".topologyKey", "can not be empty");
  if (auto s = ValidateLabelSelector(term.label_selector(), where + ".labelSelector"); !s.ok()) return s;
  return ValidateLabelSelector(term.namespace_selector(), where + ".namespaceSelector");
}

// Kubernetes' pod affinity validation: terms with a topology key, valid
// selectors and requirements, preferred weights within 1-100.
absl::Status ValidateAffinity(const v1::Affinity& affinity) {
  const std::string base = "spec.affinity";
  if (affinity.has_node_affinity()) {
    const v1::NodeAffinity& na = affinity.node_affinity();
    const std::string at = base + ".nodeAffinity";
    if (na.has_required()) {
      const std::string req = at + ".requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms";
      if (na.required().terms().empty()) return Invalid(req, "must have at least one node selector term");
      for (int i = 0; i < na.required().terms_size(); ++i) {
        if (auto s = ValidateNodeSelectorTerm(na.required().terms(i), absl::StrCat(req, "[", i, "]")); !s.ok()) {
          return s;
        }
      }
    }
    for (int i = 0; i < na.preferred_size(); ++i) {
      const std::string pref = absl::StrCat(at, ".preferredDuringSchedulingIgnoredDuringExecution[", i, "]");
      if (auto s = ValidateWeight(na.preferred(i).weight(), pref); !s.ok()) return s;
      if (auto s = ValidateNodeSelectorTerm(na.preferred(i).preference(), pref + ".preference"); !s.ok()) return s;
    }
  }
  const std::pair<const char*, const v1::PodAffinity*> kinds[] = {
      {"podAffinity", affinity.has_pod_affinity() ? &affinity.pod_affinity() : nullptr},
      {"podAntiAffinity", affinity.has_pod_anti_affinity() ? &affinity.pod_anti_affinity() : nullptr}};
  for (const auto& [name, pa] : kinds) {
    if (pa == nullptr) continue;
    const std::string at = absl::StrCat(base, ".", name);
    for (int i = 0; i < pa->required_size(); ++i) {
      const std::string term = absl::StrCat(at, ".requiredDuringSchedulingIgnoredDuringExecution[", i, "]");
      if (auto s = ValidatePodAffinityTerm(pa->required(i), term); !s.ok()) return s;
    }
    for (int i = 0; i < pa->preferred_size(); ++i) {
      const std::string pref = absl::StrCat(at, ".preferredDuringSchedulingIgnoredDuringExecution[", i, "]");
      if (auto s = ValidateWeight(pa->preferred(i).weight(), pref); !s.ok()) return s;
      if (auto s = ValidatePodAffinityTerm(pa->preferred(i).term(), pref + ".podAffinityTerm"); !s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace

bool IsValidUtf8(std::string_view value) {
  for (size_t i = 0; i < value.size();) {
    const size_t len = Utf8SequenceLength(value, i);
    if (len == 0) return false;
    i += len;
  }
  return true;
}

absl::Status ValidateName(std::string_view value, std::string_view field, size_t max_length, bool required) {
  return CheckName(value, [field] { return std::string(field); }, max_length, required);
}

absl::Status ValidateResources(const v1::ResourceList& list, std::string_view field) {
  return CheckResources(list, [field] { return std::string(field); });
}

absl::Status ValidatePod(const v1::Pod& pod) {
  if (auto s = ValidateMeta(pod.meta(), true); !s.ok()) return s;
  if (auto s = ValidateName(pod.node_name(), "spec.nodeName", kMaxNameLength, false); !s.ok()) return s;
  if (auto s = ValidateName(pod.scheduler_name(), "spec.schedulerName", kMaxNameLength, false); !s.ok()) return s;
  if (auto s = ValidateName(pod.nominated_node_name(), "status.nominatedNodeName", kMaxNameLength, false); !s.ok()) {
    return s;
  }
  if (auto s = ValidateContainers(pod.containers(), "spec.containers"); !s.ok()) return s;
  if (auto s = ValidateContainers(pod.init_containers(), "spec.initContainers"); !s.ok()) return s;
  if (auto s = ValidateResources(pod.overhead(), "spec.overhead"); !s.ok()) return s;
  for (int i = 0; i < pod.tolerations_size(); ++i) {
    const auto& t = pod.tolerations(i);
    if (t.operator_() == v1::Toleration::EXISTS && !t.value().empty()) {
      return Invalid(absl::StrCat("spec.tolerations[", i, "].value"), "must be empty when operator is Exists");
    }
  }
  return absl::OkStatus();
}

absl::Status ValidatePodSpec(const v1::Pod& pod) {
  if (auto s = ValidatePod(pod); !s.ok()) return s;
  if (auto s = ValidateContainerResourceNames(pod.containers(), "spec.containers"); !s.ok()) return s;
  if (auto s = ValidateContainerResourceNames(pod.init_containers(), "spec.initContainers"); !s.ok()) return s;
  if (auto s = ValidateRequestsWithinLimits(pod.containers(), "spec.containers"); !s.ok()) return s;
  if (auto s = ValidateRequestsWithinLimits(pod.init_containers(), "spec.initContainers"); !s.ok()) return s;
  if (pod.has_affinity()) {
    if (auto s = ValidateAffinity(pod.affinity()); !s.ok()) return s;
  }
  for (int i = 0; i < pod.topology_spread_constraints_size(); ++i) {
    const auto& c = pod.topology_spread_constraints(i);
    const std::string where = absl::StrCat("spec.topologySpreadConstraints[", i, "]");
    if (c.max_skew() <= 0) return Invalid(where + ".maxSkew", "must be greater than zero");
    if (c.topology_key().empty()) return Invalid(where + ".topologyKey", "can not be empty");
    if (c.has_min_domains()) {
      if (c.min_domains() <= 0) return Invalid(where + ".minDomains", "must be greater than zero");
      if (c.when_unsatisfiable() != v1::TopologySpreadConstraint::DO_NOT_SCHEDULE) {
        return Invalid(where + ".minDomains",
                       "can only use minDomains if whenUnsatisfiable=DoNotSchedule, not ScheduleAnyway");
      }
    }
    if (auto s = ValidateLabelSelector(c.label_selector(), where + ".labelSelector"); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status ValidateNode(const v1::Node& node) {
  if (auto s = ValidateMeta(node.meta(), false); !s.ok()) return s;
  if (auto s = ValidateResources(node.capacity(), "status.capacity"); !s.ok()) return s;
  if (auto s = ValidateResources(node.allocatable(), "status.allocatable"); !s.ok()) return s;
  for (int i = 0; i < node.taints_size(); ++i) {
    if (node.taints(i).key().empty()) return Invalid(absl::StrCat("spec.taints[", i, "].key"), "required");
    if (node.taints(i).effect() == v1::TAINT_EFFECT_UNSPECIFIED) {
      return Invalid(absl::StrCat("spec.taints[", i, "].effect"), "required");
    }
  }
  return absl::OkStatus();
}

absl::Status ValidatePriorityClass(const v1::PriorityClass& priority_class) {
  if (auto s = ValidateMeta(priority_class.meta(), false); !s.ok()) return s;
  // Kubernetes' PriorityClass validation: the "system-" prefix is the
  // built-in classes' (a dump of a cluster lists them, as they are), and a
  // user class is at most HighestUserDefinablePriority.
  const std::string& name = priority_class.meta().name();
  if (name.rfind("system-", 0) == 0) {
    const int64_t want = name == "system-node-critical"      ? kSystemNodeCritical
                         : name == "system-cluster-critical" ? kSystemClusterCritical
                                                             : -1;
    if (want < 0) {
      return Invalid("metadata.name", absl::StrCat("priority class names with 'system-' prefix are reserved for "
                                                   "system use only (system-node-critical, system-cluster-critical)"));
    }
    if (priority_class.value() != want || priority_class.global_default()) {
      return Invalid("value", absl::StrCat("the built-in PriorityClass ", name, " has value ", want,
                                           " and is not the global default"));
    }
  } else if (priority_class.value() > kHighestUserDefinablePriority) {
    return Invalid("value", absl::StrCat("maximum allowed value of a user defined priority is ",
                                         kHighestUserDefinablePriority, ", got ", priority_class.value()));
  }
  return absl::OkStatus();
}

absl::Status ValidateNamespace(const v1::Namespace& ns) {
  if (auto s = ValidateName(ns.meta().name(), "metadata.name", kMaxNamespaceLength); !s.ok()) return s;
  if (auto s = ValidateName(ns.meta().uid(), "metadata.uid", kMaxUidLength); !s.ok()) return s;
  if (!ns.meta().namespace_().empty()) return Invalid("metadata.namespace", "must be empty: Namespaces are cluster-scoped");
  for (const auto& [key, value] : ns.meta().labels()) {
    if (auto s = ValidateName(key, "metadata.labels", kMaxNameLength); !s.ok()) return s;
    if (auto s = ValidateName(value, absl::StrCat("metadata.labels[", Printable(key), "]"), kMaxNamespaceLength,
                              false);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status ValidatePodGroup(const v1::PodGroup& group) {
  if (auto s = ValidateMeta(group.meta(), true); !s.ok()) return s;
  const char* min_field = "spec.minMember";
  const char* timeout_field = "spec.scheduleTimeoutSeconds";
  if (group.source() == v1::PodGroup::KUBERNETES_POD_GROUP) {
    min_field = "spec.schedulingPolicy.gang.minCount";
  } else if (group.source() == v1::PodGroup::KUBERNETES_WORKLOAD) {
    min_field = "spec.podGroups[].policy.gang.minCount";
  }
  if (group.min_member() < 1) {
    return Invalid(min_field, absl::StrCat("must be at least 1, got ", group.min_member()));
  }
  if (group.schedule_timeout_seconds() < 0) {
    return Invalid(timeout_field, absl::StrCat("must not be negative, got ", group.schedule_timeout_seconds()));
  }
  return absl::OkStatus();
}

absl::Status ValidateLabelSelector(const v1::LabelSelector& selector, const std::string& path) {
  for (int i = 0; i < selector.match_expressions_size(); ++i) {
    const auto& e = selector.match_expressions(i);
    const std::string where = absl::StrCat(path, path.empty() ? "" : ".", "matchExpressions[", i, "]");
    if (e.key().empty()) return Invalid(where + ".key", "must not be empty");
    switch (e.operator_()) {
      case v1::LabelSelectorRequirement::IN:
      case v1::LabelSelectorRequirement::NOT_IN:
        if (e.values().empty()) return Invalid(where + ".values", "must be non-empty for operator In and NotIn");
        break;
      case v1::LabelSelectorRequirement::EXISTS:
      case v1::LabelSelectorRequirement::DOES_NOT_EXIST:
        if (!e.values().empty()) {
          return Invalid(where + ".values", "must be empty for operator Exists and DoesNotExist");
        }
        break;
      default: return Invalid(where + ".operator", "not a valid selector operator");
    }
  }
  return absl::OkStatus();
}

absl::Status ValidatePodDisruptionBudget(const v1::PodDisruptionBudget& pdb) {
  if (auto s = ValidateMeta(pdb.meta(), true); !s.ok()) return s;
  return ValidateLabelSelector(pdb.selector(), "spec.selector");
}

absl::Status ValidateObjectEvent(const v1::ObjectEvent& event) {
  if (event.type() != v1::ObjectEvent::UPSERT && event.type() != v1::ObjectEvent::DELETE) {
    return Invalid("type", "must be UPSERT or DELETE");
  }
  switch (event.object_case()) {
    case v1::ObjectEvent::kPod: return ValidatePod(event.pod());
    case v1::ObjectEvent::kNode: return ValidateNode(event.node());
    case v1::ObjectEvent::kPdb:
      // A deletion needs only the object's identity.
      return event.type() == v1::ObjectEvent::DELETE ? ValidateMeta(event.pdb().meta(), true)
                                                     : ValidatePodDisruptionBudget(event.pdb());
    case v1::ObjectEvent::kNamespaceObject: return ValidateNamespace(event.namespace_object());
    case v1::ObjectEvent::kPodGroup:
      // A deletion needs only the object's identity.
      return event.type() == v1::ObjectEvent::DELETE ? ValidateMeta(event.pod_group().meta(), true)
                                                     : ValidatePodGroup(event.pod_group());
    case v1::ObjectEvent::kPriorityClass: return ValidatePriorityClass(event.priority_class());
    default: return Invalid("object", "missing");
  }
}

std::string Printable(std::string_view value, size_t max_length) {
  const bool cut = value.size() > max_length;
  std::string out = absl::CHexEscape(absl::string_view(value.data(), cut ? max_length : value.size()));
  if (cut) absl::StrAppend(&out, "...");
  return out;
}

std::string DescribeObject(const v1::ObjectEvent& event) {
  auto ns_name = [](const v1::ObjectMeta& m) {
    return m.namespace_().empty() ? Printable(m.name())
                                  : absl::StrCat(Printable(m.namespace_(), kMaxNamespaceLength), "/", Printable(m.name()));
  };
  switch (event.object_case()) {
    case v1::ObjectEvent::kPod: return "Pod " + ns_name(event.pod().meta());
    case v1::ObjectEvent::kNode: return "Node " + ns_name(event.node().meta());
    case v1::ObjectEvent::kPdb: return "PodDisruptionBudget " + ns_name(event.pdb().meta());
    case v1::ObjectEvent::kPodGroup: return "PodGroup " + ns_name(event.pod_group().meta());
    case v1::ObjectEvent::kNamespaceObject: return "Namespace " + ns_name(event.namespace_object().meta());
    case v1::ObjectEvent::kPriorityClass: return "PriorityClass " + ns_name(event.priority_class().meta());
    default: return "object";
  }
}

}  // namespace podium::validation

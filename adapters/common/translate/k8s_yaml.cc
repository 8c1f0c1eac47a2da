#include "common/translate/k8s_yaml.h"
#include "common/translate/k8s_json.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <type_traits>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/translate/json_node.h"
#include "common/translate/quantity.h"
#include "common/validation/object_validation.h"
#include "common/yaml/safe_yaml.h"

namespace podium::k8s {
namespace {

// Thrown by the field readers below and caught at the object boundary in this
// file, where it becomes an absl::Status; it never leaves the module.
struct FieldError {
  std::string path;
  std::string message;
};

[[noreturn]] void Fail(const std::string& path, std::string message) {
  throw FieldError{path, std::move(message)};
}

std::string Sub(const std::string& path, std::string_view key) {
  return path.empty() ? std::string(key) : absl::StrCat(path, ".", std::string(key));
}
std::string At(const std::string& path, size_t i) { return absl::StrCat(path, "[", i, "]"); }

// The translation below reads YAML::Node (podium-sim's files) and JsonNode (the
// Kubernetes API's JSON, common/translate/json_node.h) with the same code.
YAML::Node Undefined(const YAML::Node&) { return YAML::Node(YAML::NodeType::Undefined); }
JsonNode Undefined(const JsonNode&) { return JsonNode(); }
bool DecodeBool(const YAML::Node& n, bool* b) { return YAML::convert<bool>::decode(n, *b); }
bool DecodeBool(const JsonNode& n, bool* b) { return n.DecodeBool(b); }

template <class N>
bool Present(const N& n) { return n.IsDefined() && !n.IsNull(); }

template <class N>
const char* TypeName(const N& n) {
  switch (n.Type()) {
    case YAML::NodeType::Scalar: return "a scalar";
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Map: return "a mapping";
    default: return "null";
  }
}

// m[key] where m must be a mapping (or absent). Missing keys yield an undefined node.
template <class N>
N Get(const N& m, const std::string& path, const char* key) {
  if (!Present(m)) return Undefined(m);
  if (!m.IsMap()) Fail(path, absl::StrCat("expected a mapping, got ", TypeName(m)));
  return m[key];
}

template <class N>
std::string Str(const N& n, const std::string& path) {
  if (!Present(n)) return "";
  if (!n.IsScalar()) Fail(path, absl::StrCat("expected a string, got ", TypeName(n)));
  return n.Scalar();
}

template <class N>
int64_t Int(const N& n, const std::string& path) {
  if (!n.IsScalar()) Fail(path, absl::StrCat("expected an integer, got ", TypeName(n)));
  int64_t v;
  if (!absl::SimpleAtoi(n.Scalar(), &v)) Fail(path, absl::StrCat("expected an integer, got \"", n.Scalar(), "\""));
  return v;
}

template <class N>
int32_t Int32(const N& n, const std::string& path) {
  int64_t v = Int(n, path);
  if (v < INT32_MIN || v > INT32_MAX) Fail(path, absl::StrCat("integer out of range: ", v));
  return static_cast<int32_t>(v);
}

template <class N>
bool Bool(const N& n, const std::string& path) {
  if (!Present(n)) return false;
  bool b;
  if (!n.IsScalar() || !DecodeBool(n, &b)) Fail(path, "expected a boolean");
  return b;
}

template <class N, typename F>
void ForEach(const N& n, const std::string& path, F&& fn) {
  if (!Present(n)) return;
  if (!n.IsSequence()) Fail(path, absl::StrCat("expected a list, got ", TypeName(n)));
  for (size_t i = 0; i < n.size(); ++i) fn(n[i], At(path, i));
}

// A mapping's members as (key, value); YAML keys are read as strings.
template <typename F>
void Members(const YAML::Node& n, const std::string& path, F&& fn) {
  for (const auto& kv : n) fn(Str(kv.first, path), kv.second);
}
template <typename F>
void Members(const JsonNode& n, const std::string&, F&& fn) {
  n.ForEachMember(fn);
}

template <class N, typename F>
void ForEachEntry(const N& n, const std::string& path, F&& fn) {
  if (!Present(n)) return;
  if (!n.IsMap()) Fail(path, absl::StrCat("expected a mapping, got ", TypeName(n)));
  Members(n, path, [&](const std::string& key, const N& value) { fn(key, value, Sub(path, key)); });
}

template <class N>
void StringMap(const N& n, const std::string& path,
               google::protobuf::Map<std::string, std::string>* out) {
  ForEachEntry(n, path, [&](const std::string& k, const N& v, const std::string& p) {
    (*out)[k] = Str(v, p);
  });
}

template <class N>
void Strings(const N& n, const std::string& path,
             google::protobuf::RepeatedPtrField<std::string>* out) {
  ForEach(n, path, [&](const N& v, const std::string& p) { *out->Add() = Str(v, p); });
}

template <class N>
int64_t TimeUs(const N& n, const std::string& path) {
  std::string s = Str(n, path);
  if (s.empty()) return 0;
  absl::Time t;
  std::string err;
  if (!absl::ParseTime(absl::RFC3339_full, s, &t, &err)) Fail(path, absl::StrCat("invalid time \"", s, "\": ", err));
  return absl::ToUnixMicros(t);
}

// --- resources -------------------------------------------------------------

template <class N>
int64_t QuantityValue(const N& n, const std::string& path, bool milli) {
  if (!Present(n) || !n.IsScalar()) Fail(path, absl::StrCat("expected a quantity, got ", TypeName(n)));
  const std::string& text = n.Scalar();
  auto q = Quantity::Parse(text);
  if (!q.ok()) Fail(path, std::string(q.status().message()));
  if (q->negative()) Fail(path, absl::StrCat("quantity \"", text, "\" must not be negative"));
  auto v = milli ? q->MilliValue() : q->Value();
  if (!v.ok()) Fail(path, absl::StrCat("quantity \"", text, "\" is too large"));
  return *v;
}

template <class N>
void ResourceList(const N& n, const std::string& path, v1::ResourceList* out) {
  ForEachEntry(n, path, [&](const std::string& name, const N& v, const std::string& p) {
    if (name == "cpu") {
      out->set_milli_cpu(QuantityValue(v, p, true));
    } else if (name == "memory") {
      out->set_memory_bytes(QuantityValue(v, p, false));
    } else if (name == "ephemeral-storage") {
      out->set_ephemeral_storage_bytes(QuantityValue(v, p, false));
    } else if (name == "pods") {
      out->set_pods(QuantityValue(v, p, false));
    } else {
      (*out->mutable_scalar())[name] = QuantityValue(v, p, false);
      // Kubernetes: an extended resource (a qualified name outside
      // *kubernetes.io/) is counted in whole units; 0.5 would be rounded up.
      const bool extended = name.find('/') != std::string::npos && name.find("kubernetes.io/") == std::string::npos;
      if (extended && QuantityValue(v, p, true) % 1000 != 0) {
        Fail(p, absl::StrCat("quantity \"", v.Scalar(), "\" must be an integer: ", name, " is an extended resource"));
      }
    }
  });
}

// The API server defaults a container's missing requests to its limits.
void DefaultRequestsFromLimits(v1::Container* c) {
  const v1::ResourceList& lim = c->limits();
  v1::ResourceList* req = c->mutable_requests();
  // Presence is lost in proto3 scalars; zero means unset for these fields.
  if (req->milli_cpu() == 0) req->set_milli_cpu(lim.milli_cpu());
  if (req->memory_bytes() == 0) req->set_memory_bytes(lim.memory_bytes());
  if (req->ephemeral_storage_bytes() == 0) req->set_ephemeral_storage_bytes(lim.ephemeral_storage_bytes());
  for (const auto& [k, v] : lim.scalar()) req->mutable_scalar()->insert({k, v});
}

// --- metadata --------------------------------------------------------------

std::string RandomSuffix(int n) {
  static constexpr char kAlphabet[] = "bcdfghjklmnpqrstvwxz2456789";
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::string s;
  for (int i = 0; i < n; ++i) s += kAlphabet[rng() % (sizeof(kAlphabet) - 1)];
  return s;
}

template <class N>
void Meta(const N& m, const std::string& path, bool namespaced, v1::ObjectMeta* out) {
  out->set_name(Str(Get(m, path, "name"), Sub(path, "name")));
  if (out->name().empty()) {
    std::string gen = Str(Get(m, path, "generateName"), Sub(path, "generateName"));
    if (gen.empty()) Fail(Sub(path, "name"), "missing");
    out->set_name(gen + RandomSuffix(5));
  }
  if (namespaced) {
    out->set_namespace_(Str(Get(m, path, "namespace"), Sub(path, "namespace")));
    if (out->namespace_().empty()) out->set_namespace_("default");
  }
  out->set_uid(Str(Get(m, path, "uid"), Sub(path, "uid")));
  out->set_resource_version(Str(Get(m, path, "resourceVersion"), Sub(path, "resourceVersion")));
  StringMap(Get(m, path, "labels"), Sub(path, "labels"), out->mutable_labels());
  StringMap(Get(m, path, "annotations"), Sub(path, "annotations"), out->mutable_annotations());
  out->set_creation_timestamp_us(TimeUs(Get(m, path, "creationTimestamp"), Sub(path, "creationTimestamp")));
  out->set_deletion_timestamp_us(TimeUs(Get(m, path, "deletionTimestamp"), Sub(path, "deletionTimestamp")));
  ForEach(Get(m, path, "ownerReferences"), Sub(path, "ownerReferences"),
          [&](const N& o, const std::string& p) {
            auto* r = out->add_owner_references();
            r->set_kind(Str(Get(o, p, "kind"), Sub(p, "kind")));
            r->set_name(Str(Get(o, p, "name"), Sub(p, "name")));
            r->set_uid(Str(Get(o, p, "uid"), Sub(p, "uid")));
            r->set_controller(Bool(Get(o, p, "controller"), Sub(p, "controller")));
          });
}

// --- enums -----------------------------------------------------------------

template <class N>
v1::TaintEffect Effect(const N& n, const std::string& path) {
  std::string s = Str(n, path);
  if (s.empty()) return v1::TAINT_EFFECT_UNSPECIFIED;
  if (s == "NoSchedule") return v1::NO_SCHEDULE;
  if (s == "PreferNoSchedule") return v1::PREFER_NO_SCHEDULE;
  if (s == "NoExecute") return v1::NO_EXECUTE;
  Fail(path, absl::StrCat("unknown taint effect \"", s, "\""));
}

v1::PreemptionPolicy Preemption(const std::string& s, const std::string& path) {
  if (s.empty() || s == "PreemptLowerPriority") return v1::PREEMPT_LOWER_PRIORITY;
  if (s == "Never") return v1::NEVER;
  Fail(path, absl::StrCat("unknown preemption policy \"", s, "\""));
}

// --- affinity --------------------------------------------------------------

template <class N>
void NodeSelectorTerm(const N& n, const std::string& path, v1::NodeSelectorTerm* out) {
  auto reqs = [&](const char* key, google::protobuf::RepeatedPtrField<v1::NodeSelectorRequirement>* dst) {
    ForEach(Get(n, path, key), Sub(path, key), [&](const N& r, const std::string& p) {
      auto* req = dst->Add();
      req->set_key(Str(Get(r, p, "key"), Sub(p, "key")));
      std::string op = Str(Get(r, p, "operator"), Sub(p, "operator"));
      static const std::map<std::string, v1::NodeSelectorRequirement::Operator> kOps = {
          {"In", v1::NodeSelectorRequirement::IN},          {"NotIn", v1::NodeSelectorRequirement::NOT_IN},
          {"Exists", v1::NodeSelectorRequirement::EXISTS},  {"DoesNotExist", v1::NodeSelectorRequirement::DOES_NOT_EXIST},
          {"Gt", v1::NodeSelectorRequirement::GT},          {"Lt", v1::NodeSelectorRequirement::LT}};
      auto it = kOps.find(op);
      if (it == kOps.end()) Fail(Sub(p, "operator"), absl::StrCat("unknown operator \"", op, "\""));
      req->set_operator_(it->second);
      Strings(Get(r, p, "values"), Sub(p, "values"), req->mutable_values());
    });
  };
  reqs("matchExpressions", out->mutable_match_expressions());
  reqs("matchFields", out->mutable_match_fields());
}

template <class N>
void LabelSelector(const N& n, const std::string& path, v1::LabelSelector* out) {
  StringMap(Get(n, path, "matchLabels"), Sub(path, "matchLabels"), out->mutable_match_labels());
  ForEach(Get(n, path, "matchExpressions"), Sub(path, "matchExpressions"),
          [&](const N& r, const std::string& p) {
            auto* req = out->add_match_expressions();
            req->set_key(Str(Get(r, p, "key"), Sub(p, "key")));
            std::string op = Str(Get(r, p, "operator"), Sub(p, "operator"));
            if (op == "In") req->set_operator_(v1::LabelSelectorRequirement::IN);
            else if (op == "NotIn") req->set_operator_(v1::LabelSelectorRequirement::NOT_IN);
            else if (op == "Exists") req->set_operator_(v1::LabelSelectorRequirement::EXISTS);
            else if (op == "DoesNotExist") req->set_operator_(v1::LabelSelectorRequirement::DOES_NOT_EXIST);
            else Fail(Sub(p, "operator"), absl::StrCat("unknown operator \"", op, "\""));
            Strings(Get(r, p, "values"), Sub(p, "values"), req->mutable_values());
          });
}

template <class N>
void PodAffinityTerm(const N& n, const std::string& path, v1::PodAffinityTerm* out) {
  if (Present(Get(n, path, "labelSelector")))
    LabelSelector(Get(n, path, "labelSelector"), Sub(path, "labelSelector"), out->mutable_label_selector());
  Strings(Get(n, path, "namespaces"), Sub(path, "namespaces"), out->mutable_namespaces());
  out->set_topology_key(Str(Get(n, path, "topologyKey"), Sub(path, "topologyKey")));
  if (Present(Get(n, path, "namespaceSelector")))
    LabelSelector(Get(n, path, "namespaceSelector"), Sub(path, "namespaceSelector"),
                  out->mutable_namespace_selector());
  Strings(Get(n, path, "matchLabelKeys"), Sub(path, "matchLabelKeys"), out->mutable_match_label_keys());
  Strings(Get(n, path, "mismatchLabelKeys"), Sub(path, "mismatchLabelKeys"), out->mutable_mismatch_label_keys());
}

template <class N>
void PodAffinity(const N& n, const std::string& path, v1::PodAffinity* out) {
  ForEach(Get(n, path, "requiredDuringSchedulingIgnoredDuringExecution"),
          Sub(path, "requiredDuringSchedulingIgnoredDuringExecution"),
          [&](const N& t, const std::string& p) { PodAffinityTerm(t, p, out->add_required()); });
  ForEach(Get(n, path, "preferredDuringSchedulingIgnoredDuringExecution"),
          Sub(path, "preferredDuringSchedulingIgnoredDuringExecution"),
          [&](const N& t, const std::string& p) {
            auto* w = out->add_preferred();
            w->set_weight(Int32(Get(t, p, "weight"), Sub(p, "weight")));
            PodAffinityTerm(Get(t, p, "podAffinityTerm"), Sub(p, "podAffinityTerm"), w->mutable_term());
          });
}

template <class N>
void Affinity(const N& n, const std::string& path, v1::Affinity* out) {
  N na = Get(n, path, "nodeAffinity");
  if (Present(na)) {
    std::string nap = Sub(path, "nodeAffinity");
    auto* dst = out->mutable_node_affinity();
    N req = Get(na, nap, "requiredDuringSchedulingIgnoredDuringExecution");
    if (Present(req)) {
      std::string rp = Sub(nap, "requiredDuringSchedulingIgnoredDuringExecution");
      auto* sel = dst->mutable_required();
      ForEach(Get(req, rp, "nodeSelectorTerms"), Sub(rp, "nodeSelectorTerms"),
              [&](const N& t, const std::string& p) { NodeSelectorTerm(t, p, sel->add_terms()); });
    }
    ForEach(Get(na, nap, "preferredDuringSchedulingIgnoredDuringExecution"),
            Sub(nap, "preferredDuringSchedulingIgnoredDuringExecution"),
            [&](const N& t, const std::string& p) {
              auto* pref = dst->add_preferred();
              pref->set_weight(Int32(Get(t, p, "weight"), Sub(p, "weight")));
              NodeSelectorTerm(Get(t, p, "preference"), Sub(p, "preference"), pref->mutable_preference());
            });
  }
  if (Present(Get(n, path, "podAffinity")))
    PodAffinity(Get(n, path, "podAffinity"), Sub(path, "podAffinity"), out->mutable_pod_affinity());
  if (Present(Get(n, path, "podAntiAffinity")))
    PodAffinity(Get(n, path, "podAntiAffinity"), Sub(path, "podAntiAffinity"), out->mutable_pod_anti_affinity());
}

// --- pod -------------------------------------------------------------------

template <class N>
void Container(const N& n, const std::string& path, bool init, v1::Container* out) {
  out->set_name(Str(Get(n, path, "name"), Sub(path, "name")));
  out->set_image(Str(Get(n, path, "image"), Sub(path, "image")));
  N res = Get(n, path, "resources");
  std::string rp = Sub(path, "resources");
  // In a file, a misspelt key here ("request:") would leave the pod with no
  // requests at all: refused as strict decoding refuses it. The API's
  // objects (JsonNode) were checked by the API server, and a key a newer API
  // adds must not make every pod untranslatable to the adapter.
  if constexpr (!std::is_same_v<N, JsonNode>) {
    ForEachEntry(res, rp, [&](const std::string& key, const N&, const std::string& kp) {
      if (key != "requests" && key != "limits" && key != "claims") {
        Fail(kp, "unknown field (a container's resources has requests, limits and claims)");
      }
    });
  }
  ResourceList(Get(res, rp, "requests"), Sub(rp, "requests"), out->mutable_requests());
  ResourceList(Get(res, rp, "limits"), Sub(rp, "limits"), out->mutable_limits());
  DefaultRequestsFromLimits(out);
  ForEach(Get(n, path, "ports"), Sub(path, "ports"), [&](const N& p, const std::string& pp) {
    auto* port = out->add_ports();
    if (Present(Get(p, pp, "containerPort")))
      port->set_container_port(Int32(Get(p, pp, "containerPort"), Sub(pp, "containerPort")));
    if (Present(Get(p, pp, "hostPort"))) port->set_host_port(Int32(Get(p, pp, "hostPort"), Sub(pp, "hostPort")));
    port->set_protocol(Str(Get(p, pp, "protocol"), Sub(pp, "protocol")));
    if (port->protocol().empty()) port->set_protocol("TCP");
    port->set_host_ip(Str(Get(p, pp, "hostIP"), Sub(pp, "hostIP")));
  });
  std::string restart = Str(Get(n, path, "restartPolicy"), Sub(path, "restartPolicy"));
  if (!restart.empty()) {
    if (!init || restart != "Always")
      Fail(Sub(path, "restartPolicy"), absl::StrCat("unsupported value \"", restart, "\" (only Always, on init containers)"));
    out->set_restartable(true);
  }
}

struct PodExtras {
  bool has_priority = false;
  bool has_preemption_policy = false;
};

// The gang a pod joins: Kubernetes' spec.schedulingGroup, else its 1.35 alpha
// spec.workloadRef, else scheduler-plugins' label.
template <class N>
void PodGroupOfPod(const N& obj, const N& spec, v1::Pod* pod) {
  const std::string sp = "spec";
  N group = Get(spec, sp, "schedulingGroup");
  if (Present(group)) {
    const std::string p = Sub(sp, "schedulingGroup");
    std::string name = Str(Get(group, p, "podGroupName"), Sub(p, "podGroupName"));
    if (name.empty()) Fail(Sub(p, "podGroupName"), "required");
    pod->set_pod_group(name);
    return;
  }
  N ref = Get(spec, sp, "workloadRef");
  if (Present(ref)) {
    const std::string p = Sub(sp, "workloadRef");
    std::string workload = Str(Get(ref, p, "name"), Sub(p, "name"));
    std::string group_name = Str(Get(ref, p, "podGroup"), Sub(p, "podGroup"));
    if (workload.empty()) Fail(Sub(p, "name"), "required");
    if (group_name.empty()) Fail(Sub(p, "podGroup"), "required");
    // One gang per replica key is not supported yet (the contract names a
    // gang by one string): refused rather than silently merged into one gang.
    const std::string replica = Str(Get(ref, p, "podGroupReplicaKey"), Sub(p, "podGroupReplicaKey"));
    if (!replica.empty()) {
      Fail(Sub(p, "podGroupReplicaKey"),
           absl::StrCat("not supported: Podium would schedule every replica of pod group ", workload, "/", group_name,
                        " as one gang; leave it unset (got \"", replica, "\")"));
    }
    pod->set_pod_group(absl::StrCat(workload, "/", group_name));
    return;
  }
  auto label = pod->meta().labels().find("scheduling.x-k8s.io/pod-group");
  if (label != pod->meta().labels().end()) pod->set_pod_group(label->second);
}

template <class N>
v1::Pod ConvertPod(const N& obj, PodExtras* extras) {
  v1::Pod pod;
  Meta(Get(obj, "", "metadata"), "metadata", true, pod.mutable_meta());
  N spec = Get(obj, "", "spec");
  const std::string sp = "spec";
  pod.set_scheduler_name(Str(Get(spec, sp, "schedulerName"), Sub(sp, "schedulerName")));
  pod.set_node_name(Str(Get(spec, sp, "nodeName"), Sub(sp, "nodeName")));
  if (Present(Get(spec, sp, "priority"))) {
    extras->has_priority = true;
    pod.set_priority(Int32(Get(spec, sp, "priority"), Sub(sp, "priority")));
  }
  pod.set_priority_class_name(Str(Get(spec, sp, "priorityClassName"), Sub(sp, "priorityClassName")));
  std::string pp = Str(Get(spec, sp, "preemptionPolicy"), Sub(sp, "preemptionPolicy"));
  extras->has_preemption_policy = !pp.empty();
  pod.set_preemption_policy(Preemption(pp, Sub(sp, "preemptionPolicy")));
  ForEach(Get(spec, sp, "containers"), Sub(sp, "containers"),
          [&](const N& c, const std::string& p) { Container(c, p, false, pod.add_containers()); });
  ForEach(Get(spec, sp, "initContainers"), Sub(sp, "initContainers"),
          [&](const N& c, const std::string& p) { Container(c, p, true, pod.add_init_containers()); });
  ResourceList(Get(spec, sp, "overhead"), Sub(sp, "overhead"), pod.mutable_overhead());
  StringMap(Get(spec, sp, "nodeSelector"), Sub(sp, "nodeSelector"), pod.mutable_node_selector());
  if (Present(Get(spec, sp, "affinity"))) Affinity(Get(spec, sp, "affinity"), Sub(sp, "affinity"), pod.mutable_affinity());
  ForEach(Get(spec, sp, "tolerations"), Sub(sp, "tolerations"), [&](const N& t, const std::string& p) {
    auto* tol = pod.add_tolerations();
    tol->set_key(Str(Get(t, p, "key"), Sub(p, "key")));
    std::string op = Str(Get(t, p, "operator"), Sub(p, "operator"));
    if (op.empty() || op == "Equal") tol->set_operator_(v1::Toleration::EQUAL);
    else if (op == "Exists") tol->set_operator_(v1::Toleration::EXISTS);
    else Fail(Sub(p, "operator"), absl::StrCat("unknown operator \"", op, "\""));
    tol->set_value(Str(Get(t, p, "value"), Sub(p, "value")));
    tol->set_effect(Effect(Get(t, p, "effect"), Sub(p, "effect")));
    if (Present(Get(t, p, "tolerationSeconds")))
      tol->set_toleration_seconds(Int(Get(t, p, "tolerationSeconds"), Sub(p, "tolerationSeconds")));
  });
  ForEach(Get(spec, sp, "topologySpreadConstraints"), Sub(sp, "topologySpreadConstraints"),
          [&](const N& t, const std::string& p) {
            auto* c = pod.add_topology_spread_constraints();
            c->set_max_skew(Int32(Get(t, p, "maxSkew"), Sub(p, "maxSkew")));
            c->set_topology_key(Str(Get(t, p, "topologyKey"), Sub(p, "topologyKey")));
            std::string w = Str(Get(t, p, "whenUnsatisfiable"), Sub(p, "whenUnsatisfiable"));
            if (w.empty() || w == "DoNotSchedule") c->set_when_unsatisfiable(v1::TopologySpreadConstraint::DO_NOT_SCHEDULE);
            else if (w == "ScheduleAnyway") c->set_when_unsatisfiable(v1::TopologySpreadConstraint::SCHEDULE_ANYWAY);
            else Fail(Sub(p, "whenUnsatisfiable"), absl::StrCat("unknown value \"", w, "\""));
            if (Present(Get(t, p, "labelSelector")))
              LabelSelector(Get(t, p, "labelSelector"), Sub(p, "labelSelector"), c->mutable_label_selector());
            if (Present(Get(t, p, "minDomains"))) c->set_min_domains(Int32(Get(t, p, "minDomains"), Sub(p, "minDomains")));
            auto policy = [&](const char* key) {
              std::string v = Str(Get(t, p, key), Sub(p, key));
              if (v.empty()) return v1::TopologySpreadConstraint::POLICY_UNSPECIFIED;
              if (v == "Honor") return v1::TopologySpreadConstraint::HONOR;
              if (v == "Ignore") return v1::TopologySpreadConstraint::IGNORE;
              Fail(Sub(p, key), absl::StrCat("unknown policy \"", v, "\""));
            };
            c->set_node_affinity_policy(policy("nodeAffinityPolicy"));
            c->set_node_taints_policy(policy("nodeTaintsPolicy"));
            Strings(Get(t, p, "matchLabelKeys"), Sub(p, "matchLabelKeys"), c->mutable_match_label_keys());
          });
  ForEach(Get(spec, sp, "schedulingGates"), Sub(sp, "schedulingGates"), [&](const N& g, const std::string& p) {
    pod.add_scheduling_gates(Str(Get(g, p, "name"), Sub(p, "name")));
  });

  N status = Get(obj, "", "status");
  const std::string st = "status";
  std::string phase = Str(Get(status, st, "phase"), Sub(st, "phase"));
  static const std::map<std::string, v1::PodPhase> kPhases = {
      {"", v1::PHASE_UNSPECIFIED}, {"Pending", v1::PENDING}, {"Running", v1::RUNNING},
      {"Succeeded", v1::SUCCEEDED}, {"Failed", v1::FAILED}, {"Unknown", v1::PHASE_UNSPECIFIED}};
  auto ph = kPhases.find(phase);
  if (ph == kPhases.end()) Fail(Sub(st, "phase"), absl::StrCat("unknown phase \"", phase, "\""));
  pod.set_phase(ph->second);
  pod.set_nominated_node_name(Str(Get(status, st, "nominatedNodeName"), Sub(st, "nominatedNodeName")));
  pod.set_start_time_us(TimeUs(Get(status, st, "startTime"), Sub(st, "startTime")));
  ForEach(Get(status, st, "conditions"), Sub(st, "conditions"), [&](const N& c, const std::string& p) {
    auto* cond = pod.add_conditions();
    cond->set_type(Str(Get(c, p, "type"), Sub(p, "type")));
    cond->set_status(Str(Get(c, p, "status"), Sub(p, "status")));
    cond->set_reason(Str(Get(c, p, "reason"), Sub(p, "reason")));
    cond->set_message(Str(Get(c, p, "message"), Sub(p, "message")));
    cond->set_last_transition_time_us(TimeUs(Get(c, p, "lastTransitionTime"), Sub(p, "lastTransitionTime")));
  });
  // A pending in-place resize: Kubernetes 1.33+ reports it as conditions
  // (PodResizePending with reason Deferred or Infeasible, PodResizeInProgress),
  // 1.27-1.32 as status.resize, deprecated since.
  pod.set_resize_status(Str(Get(status, st, "resize"), Sub(st, "resize")));
  for (const auto& c : pod.conditions()) {
    if (c.status() != "True") continue;
    if (c.type() == "PodResizePending" && (c.reason() == "Deferred" || c.reason() == "Infeasible")) {
      pod.set_resize_status(c.reason());
      break;
    }
    if (c.type() == "PodResizeInProgress" && pod.resize_status().empty()) pod.set_resize_status("InProgress");
  }
  ForEach(Get(status, st, "containerStatuses"), Sub(st, "containerStatuses"),
          [&](const N& cs, const std::string& p) {
            v1::ResourceList alloc;
            ResourceList(Get(cs, p, "allocatedResources"), Sub(p, "allocatedResources"), &alloc);
            auto* dst = pod.mutable_allocated();
            dst->set_milli_cpu(dst->milli_cpu() + alloc.milli_cpu());
            dst->set_memory_bytes(dst->memory_bytes() + alloc.memory_bytes());
            dst->set_ephemeral_storage_bytes(dst->ephemeral_storage_bytes() + alloc.ephemeral_storage_bytes());
            for (const auto& [k, v] : alloc.scalar()) (*dst->mutable_scalar())[k] += v;
          });
  if (pod.resize_status().empty()) pod.clear_allocated();  // Only meaningful while a resize is pending.

  PodGroupOfPod(obj, spec, &pod);
  return pod;
}

// --- node ------------------------------------------------------------------

template <class N>
v1::Node ConvertNode(const N& obj) {
  v1::Node node;
  Meta(Get(obj, "", "metadata"), "metadata", false, node.mutable_meta());
  N spec = Get(obj, "", "spec");
  const std::string sp = "spec";
  node.set_unschedulable(Bool(Get(spec, sp, "unschedulable"), Sub(sp, "unschedulable")));
  ForEach(Get(spec, sp, "taints"), Sub(sp, "taints"), [&](const N& t, const std::string& p) {
    auto* taint = node.add_taints();
    taint->set_key(Str(Get(t, p, "key"), Sub(p, "key")));
    if (taint->key().empty()) Fail(Sub(p, "key"), "missing");
    taint->set_value(Str(Get(t, p, "value"), Sub(p, "value")));
    taint->set_effect(Effect(Get(t, p, "effect"), Sub(p, "effect")));
    if (taint->effect() == v1::TAINT_EFFECT_UNSPECIFIED) Fail(Sub(p, "effect"), "missing");
  });
  N status = Get(obj, "", "status");
  const std::string st = "status";
  ResourceList(Get(status, st, "capacity"), Sub(st, "capacity"), node.mutable_capacity());
  if (Present(Get(status, st, "allocatable"))) {
    ResourceList(Get(status, st, "allocatable"), Sub(st, "allocatable"), node.mutable_allocatable());
  } else {
    *node.mutable_allocatable() = node.capacity();
  }
  ForEach(Get(status, st, "images"), Sub(st, "images"), [&](const N& i, const std::string& p) {
    auto* img = node.add_images();
    Strings(Get(i, p, "names"), Sub(p, "names"), img->mutable_names());
    if (Present(Get(i, p, "sizeBytes"))) img->set_size_bytes(Int(Get(i, p, "sizeBytes"), Sub(p, "sizeBytes")));
  });
  ForEach(Get(status, st, "conditions"), Sub(st, "conditions"), [&](const N& c, const std::string& p) {
    auto* cond = node.add_conditions();
    cond->set_type(Str(Get(c, p, "type"), Sub(p, "type")));
    cond->set_status(Str(Get(c, p, "status"), Sub(p, "status")));
  });
  return node;
}

template <class N>
v1::PriorityClass ConvertPriorityClass(const N& obj) {
  v1::PriorityClass pc;
  Meta(Get(obj, "", "metadata"), "metadata", false, pc.mutable_meta());
  N v = Get(obj, "", "value");
  if (!Present(v)) Fail("value", "missing");
  pc.set_value(Int32(v, "value"));
  pc.set_global_default(Bool(Get(obj, "", "globalDefault"), "globalDefault"));
  pc.set_preemption_policy(Preemption(Str(Get(obj, "", "preemptionPolicy"), "preemptionPolicy"), "preemptionPolicy"));
  return pc;
}

// --- Namespace (v1) ---------------------------------------------------------

template <class N>
v1::Namespace ConvertNamespace(const N& obj) {
  v1::Namespace ns;
  Meta(Get(obj, "", "metadata"), "metadata", false, ns.mutable_meta());
  return ns;
}

// --- PodDisruptionBudget (policy/v1) -----------------------------------------

template <class N>
void IntOrPercentField(const N& n, const std::string& path, v1::IntOrPercent* out) {
  if (!n.IsScalar()) Fail(path, absl::StrCat("expected an integer or a percentage, got ", TypeName(n)));
  const std::string& text = n.Scalar();
  if (!text.empty() && text.back() == '%') {
    int64_t v;
    if (!absl::SimpleAtoi(text.substr(0, text.size() - 1), &v) || v < 0 || v > 100) {
      Fail(path, absl::StrCat("invalid percentage \"", text, "\" (0%-100%)"));
    }
    out->set_percent(text);
    return;
  }
  const int32_t v = Int32(n, path);
  if (v < 0) Fail(path, "must not be negative");
  out->set_int_value(v);
}

template <class N>
v1::PodDisruptionBudget ConvertPdb(const N& obj) {
  v1::PodDisruptionBudget pdb;
  Meta(Get(obj, "", "metadata"), "metadata", true, pdb.mutable_meta());
  if (pdb.meta().namespace_().empty()) pdb.mutable_meta()->set_namespace_("default");
  N spec = Get(obj, "", "spec");
  N selector = Get(spec, "spec", "selector");
  if (Present(selector)) LabelSelector(selector, "spec.selector", pdb.mutable_selector());
  // What the API server's validation refuses: a selector the scheduler could
  // not read would otherwise silently match nothing.
  for (int i = 0; i < pdb.selector().match_expressions_size(); ++i) {
    const auto& e = pdb.selector().match_expressions(i);
    const std::string p = absl::StrCat("spec.selector.matchExpressions[", i, "]");
    if (e.key().empty()) Fail(Sub(p, "key"), "must not be empty");
    const bool needs_values = e.operator_() == v1::LabelSelectorRequirement::IN ||
                              e.operator_() == v1::LabelSelectorRequirement::NOT_IN;
    if (needs_values && e.values().empty()) Fail(Sub(p, "values"), "must be non-empty for operator In and NotIn");
    if (!needs_values && !e.values().empty()) {
      Fail(Sub(p, "values"), "must be empty for operator Exists and DoesNotExist");
    }
  }
  N min_available = Get(spec, "spec", "minAvailable");
  N max_unavailable = Get(spec, "spec", "maxUnavailable");
  if (Present(min_available) && Present(max_unavailable)) {
    Fail("spec", "minAvailable and maxUnavailable cannot both be set");
  }
  if (Present(min_available)) IntOrPercentField(min_available, "spec.minAvailable", pdb.mutable_min_available());
  if (Present(max_unavailable)) {
    IntOrPercentField(max_unavailable, "spec.maxUnavailable", pdb.mutable_max_unavailable());
  }
  N status = Get(obj, "", "status");
  auto count = [&](const char* key, auto setter) {
    N v = Get(status, "status", key);
    if (Present(v)) (pdb.*setter)(Int32(v, Sub("status", key)));
  };
  count("disruptionsAllowed", &v1::PodDisruptionBudget::set_disruptions_allowed);
  count("currentHealthy", &v1::PodDisruptionBudget::set_current_healthy);
  count("desiredHealthy", &v1::PodDisruptionBudget::set_desired_healthy);
  count("expectedPods", &v1::PodDisruptionBudget::set_expected_pods);
  ForEachEntry(Get(status, "status", "disruptedPods"), "status.disruptedPods",
               [&](const std::string& name, const N& v, const std::string& p) {
                 (*pdb.mutable_disrupted_pods())[name] = TimeUs(v, p);
               });
  return pdb;
}

// --- gangs: PodGroup (scheduler-plugins, Kubernetes) and Workload -----------

// Kubernetes' schedulingPolicy / policy: exactly one of basic and gang.
template <class N>
int32_t GangMinCount(const N& policy, const std::string& path) {
  const bool basic = Present(Get(policy, path, "basic"));
  const bool gang = Present(Get(policy, path, "gang"));
  if (basic == gang) Fail(path, "exactly one of basic and gang must be set");
  if (basic) return 1;  // Each pod on its own; the group only has to exist.
  const std::string gp = Sub(path, "gang");
  N min = Get(Get(policy, path, "gang"), gp, "minCount");
  if (!Present(min)) Fail(Sub(gp, "minCount"), "required");
  return Int32(min, Sub(gp, "minCount"));
}

template <class N>
v1::PodGroup ConvertPodGroup(const N& obj) {
  v1::PodGroup group;
  Meta(Get(obj, "", "metadata"), "metadata", true, group.mutable_meta());
  const std::string api = Str(Get(obj, "", "apiVersion"), "apiVersion");
  N spec = Get(obj, "", "spec");
  const std::string sp = "spec";
  if (absl::StartsWith(api, "scheduling.x-k8s.io/")) {
    group.set_source(v1::PodGroup::SCHEDULER_PLUGINS);
    if (Present(Get(spec, sp, "minMember"))) {
      group.set_min_member(Int32(Get(spec, sp, "minMember"), Sub(sp, "minMember")));
    }
    if (Present(Get(spec, sp, "scheduleTimeoutSeconds"))) {
      group.set_schedule_timeout_seconds(
          Int32(Get(spec, sp, "scheduleTimeoutSeconds"), Sub(sp, "scheduleTimeoutSeconds")));
    }
  } else if (absl::StartsWith(api, "scheduling.k8s.io/")) {
    group.set_source(v1::PodGroup::KUBERNETES_POD_GROUP);
    N policy = Get(spec, sp, "schedulingPolicy");
    if (!Present(policy)) Fail(Sub(sp, "schedulingPolicy"), "required");
    group.set_min_member(GangMinCount(policy, Sub(sp, "schedulingPolicy")));
    group.set_schedule_timeout_seconds(kKubernetesGangTimeoutSeconds);
  } else {
    Fail("apiVersion", absl::StrCat("\"", validation::Printable(api, 64),
                                    "\" is neither scheduling.x-k8s.io (scheduler-plugins) nor scheduling.k8s.io"));
  }
  // The spec's rules now (the uid may come later: LoadCluster stamps it, then
  // validates the whole object).
  v1::PodGroup identified = group;
  if (identified.meta().uid().empty()) identified.mutable_meta()->set_uid("-");
  if (absl::Status s = validation::ValidatePodGroup(identified); !s.ok()) Fail("", std::string(s.message()));
  return group;
}

template <class N>
std::vector<v1::PodGroup> ConvertWorkload(const N& obj) {
  v1::ObjectMeta meta;
  Meta(Get(obj, "", "metadata"), "metadata", true, &meta);
  N spec = Get(obj, "", "spec");
  const std::string sp = "spec";
  std::vector<v1::PodGroup> groups;
  ForEach(Get(spec, sp, "podGroups"), Sub(sp, "podGroups"), [&](const N& g, const std::string& p) {
    std::string name = Str(Get(g, p, "name"), Sub(p, "name"));
    if (name.empty()) Fail(Sub(p, "name"), "required");
    for (const v1::PodGroup& other : groups) {
      if (other.meta().name() == absl::StrCat(meta.name(), "/", name)) Fail(Sub(p, "name"), absl::StrCat("duplicate pod group \"", name, "\""));
    }
    v1::PodGroup group;
    *group.mutable_meta() = meta;
    group.mutable_meta()->set_name(absl::StrCat(meta.name(), "/", name));
    if (!meta.uid().empty()) group.mutable_meta()->set_uid(absl::StrCat(meta.uid(), "/", name));
    group.set_source(v1::PodGroup::KUBERNETES_WORKLOAD);
    N policy = Get(g, p, "policy");
    if (!Present(policy)) Fail(Sub(p, "policy"), "required");
    group.set_min_member(GangMinCount(policy, Sub(p, "policy")));
    group.set_schedule_timeout_seconds(kKubernetesGangTimeoutSeconds);
    if (group.min_member() < 1) {
      Fail(Sub(Sub(Sub(p, "policy"), "gang"), "minCount"), absl::StrCat("must be at least 1, got ", group.min_member()));
    }
    groups.push_back(std::move(group));
  });
  if (groups.empty()) Fail(Sub(sp, "podGroups"), "required: a Workload needs at least one pod group");
  return groups;
}

template <typename F>
auto Convert(F&& f) -> absl::StatusOr<decltype(f())> {
  try {
    return f();
  } catch (const FieldError& e) {
    return absl::InvalidArgumentError(e.path.empty() ? e.message : absl::StrCat(e.path, ": ", e.message));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(e.what());
  }
}

// m[key]'s text when m is a mapping and the value a scalar, else "". Never
// throws: yaml-cpp throws InvalidNode on IsScalar() of a missing key.
std::string ScalarAt(const YAML::Node& m, const char* key) {
  if (!m.IsDefined() || !m.IsMap()) return "";
  YAML::Node v = m[key];
  return v.IsDefined() && v.IsScalar() ? v.Scalar() : "";
}

// "(Pod default/web-1)", best effort from a possibly malformed object.
std::string Describe(const std::string& kind, const YAML::Node& obj) {
  std::string ns, name;
  if (obj.IsMap() && obj["metadata"].IsDefined()) {
    YAML::Node meta = obj["metadata"];
    ns = ScalarAt(meta, "namespace");
    name = ScalarAt(meta, "name");
  }
  if ((kind == "Pod" || kind == "PodGroup" || kind == "Workload") && ns.empty()) ns = "default";
  // Escaped and cut: the name may be what is wrong with the object.
  std::string id = ns.empty() ? validation::Printable(name)
                              : absl::StrCat(validation::Printable(ns, validation::kMaxNamespaceLength), "/",
                                             validation::Printable(name));
  return id.empty() ? absl::StrCat("(", validation::Printable(kind, 64), ")")
                    : absl::StrCat("(", validation::Printable(kind, 64), " ", id, ")");
}

struct PendingPod {
  LoadedPod loaded;
  PodExtras extras;
  std::string where;  // "file: document N (Pod ns/name)" for late errors.
};

struct Loader {
  LoadedCluster cluster;
  std::vector<PendingPod> pods;
  std::vector<std::string> class_where;
  std::vector<std::string> node_where;
  std::vector<std::string> namespace_where;
  std::vector<std::string> group_where;
  std::vector<std::string> pdb_where;

  absl::Status Object(const std::string& where_doc, const YAML::Node& obj) {
    if (!obj.IsMap()) return absl::InvalidArgumentError(absl::StrCat(where_doc, ": expected a Kubernetes object (a mapping), got ", TypeName(obj)));
    std::string kind = ScalarAt(obj, "kind");
    if (kind.empty()) return absl::InvalidArgumentError(absl::StrCat(where_doc, ": kind: missing"));
    std::string where = absl::StrCat(where_doc, " ", Describe(kind, obj));
    auto wrap = [&](const absl::Status& s) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": ", s.message()));
    };
    if (kind == "Pod") {
      PendingPod p;
      auto pod = Convert([&] { return ConvertPod(obj, &p.extras); });
      if (!pod.ok()) return wrap(pod.status());
      p.loaded.pod = *std::move(pod);
      auto ann = p.loaded.pod.meta().annotations().find(std::string(kCreateLaterAnnotation));
      p.loaded.create_later = ann != p.loaded.pod.meta().annotations().end() && ann->second == "true";
      auto replaces = p.loaded.pod.meta().annotations().find(std::string(kReplacesAnnotation));
      if (replaces != p.loaded.pod.meta().annotations().end()) p.loaded.replaces = replaces->second;
      if (auto grace = SimTerminationGrace(p.loaded.pod); !grace.ok()) return wrap(grace.status());
      p.where = where;
      pods.push_back(std::move(p));
    } else if (kind == "Node") {
      auto node = Convert([&] { return ConvertNode(obj); });
      if (!node.ok()) return wrap(node.status());
      cluster.nodes.push_back(*std::move(node));
      node_where.push_back(where);
    } else if (kind == "PodDisruptionBudget") {
      auto pdb = Convert([&] { return ConvertPdb(obj); });
      if (!pdb.ok()) return wrap(pdb.status());
      cluster.pdbs.push_back(*std::move(pdb));
      pdb_where.push_back(where);
    } else if (kind == "Namespace") {
      auto ns = Convert([&] { return ConvertNamespace(obj); });
      if (!ns.ok()) return wrap(ns.status());
      cluster.namespaces.push_back(*std::move(ns));
      namespace_where.push_back(where);
    } else if (kind == "PodGroup") {
      auto group = Convert([&] { return ConvertPodGroup(obj); });
      if (!group.ok()) return wrap(group.status());
      cluster.pod_groups.push_back(*std::move(group));
      group_where.push_back(where);
    } else if (kind == "Workload") {
      auto groups = Convert([&] { return ConvertWorkload(obj); });
      if (!groups.ok()) return wrap(groups.status());
      for (auto& g : *groups) {
        cluster.pod_groups.push_back(std::move(g));
        group_where.push_back(where);
      }
    } else if (kind == "PriorityClass") {
      auto pc = Convert([&] { return ConvertPriorityClass(obj); });
      if (!pc.ok()) return wrap(pc.status());
      cluster.priority_classes.push_back(*std::move(pc));
      class_where.push_back(where);
    } else {
      cluster.warnings.push_back(absl::StrCat(where, ": skipping unsupported kind ", validation::Printable(kind, 64)));
    }
    return absl::OkStatus();
  }

  absl::Status Source(const YamlSource& src, const yaml::YamlLimits& limits) {
    auto docs = yaml::LoadAllDocuments(src.name, src.text, limits);
    if (!docs.ok()) return docs.status();
    // The converters catch what yaml-cpp throws per object; this is the net
    // for the walk between objects, so nothing escapes as an abort.
    try {
      return Documents(src, *docs);
    } catch (const YAML::Exception& e) {
      return absl::InvalidArgumentError(absl::StrFormat("%s: line %d, column %d: %s", src.name, e.mark.line + 1,
                                                        e.mark.column + 1, e.msg));
    }
  }

  absl::Status Documents(const YamlSource& src, const std::vector<YAML::Node>& docs) {
    for (size_t d = 0; d < docs.size(); ++d) {
      const YAML::Node& doc = docs[d];
      if (!Present(doc)) continue;
      std::string where = absl::StrCat(src.name, ": document ", d + 1);
      std::string kind = ScalarAt(doc, "kind");
      const bool has_items = doc.IsMap() && doc["items"].IsDefined();
      if (kind == "List" || (kind.size() > 4 && kind.ends_with("List") && has_items)) {
        YAML::Node items = doc["items"];
        if (!Present(items)) continue;
        if (!items.IsSequence()) return absl::InvalidArgumentError(absl::StrCat(where, ": items: expected a list"));
        for (size_t i = 0; i < items.size(); ++i) {
          absl::Status s = Object(absl::StrCat(where, " item ", i + 1), items[i]);
          if (!s.ok()) return s;
        }
      } else {
        absl::Status s = Object(where, doc);
        if (!s.ok()) return s;
      }
    }
    return absl::OkStatus();
  }

  // Kubernetes' Priority admission: spec.priority from priorityClassName, or
  // the globalDefault class, else 0; preemptionPolicy from the class.
  absl::Status ResolvePriorities() {
    std::map<std::string, const v1::PriorityClass*> classes;
    const v1::PriorityClass* global_default = nullptr;
    for (size_t i = 0; i < cluster.priority_classes.size(); ++i) {
      const auto& pc = cluster.priority_classes[i];
      if (!classes.emplace(pc.meta().name(), &pc).second)
        return absl::InvalidArgumentError(absl::StrCat(class_where[i], ": duplicate PriorityClass ", pc.meta().name()));
      if (pc.global_default()) {
        if (global_default != nullptr)
          return absl::InvalidArgumentError(absl::StrCat(class_where[i], ": globalDefault: PriorityClass ",
                                                         global_default->meta().name(), " is already the global default"));
        global_default = &pc;
      }
    }
    for (PendingPod& p : pods) {
      v1::Pod& pod = p.loaded.pod;
      const v1::PriorityClass* pc = nullptr;
      if (!pod.priority_class_name().empty()) {
        auto it = classes.find(pod.priority_class_name());
        if (it != classes.end()) {
          pc = it->second;
        } else if (pod.priority_class_name() == "system-cluster-critical") {
          if (!p.extras.has_priority) pod.set_priority(kSystemClusterCritical);
        } else if (pod.priority_class_name() == "system-node-critical") {
          if (!p.extras.has_priority) pod.set_priority(kSystemNodeCritical);
        } else {
          return absl::InvalidArgumentError(absl::StrCat(p.where, ": spec.priorityClassName: no PriorityClass named \"",
                                                         pod.priority_class_name(), "\""));
        }
      } else if (global_default != nullptr && !p.extras.has_priority) {
        pc = global_default;
        pod.set_priority_class_name(pc->meta().name());
      }
      if (pc != nullptr) {
        if (!p.extras.has_priority) pod.set_priority(pc->value());
        if (!p.extras.has_preemption_policy) pod.set_preemption_policy(pc->preemption_policy());
      }
    }
    return absl::OkStatus();
  }
};

// Unique groups; gangs that cannot start as loaded are warned about (their
// pods wait, visible in the scheduler's queue with the reason).
template <typename UniqueUid>
absl::Status CheckPodGroups(const Loader& loader, LoadedCluster* out, UniqueUid& unique_uid) {
  std::map<std::string, size_t> members;  // "ns/group" -> pods naming it.
  for (const PendingPod& p : loader.pods) {
    if (!p.loaded.pod.pod_group().empty()) {
      ++members[absl::StrCat(p.loaded.pod.meta().namespace_(), "/", p.loaded.pod.pod_group())];
    }
  }
  std::map<std::string, std::string> names;  // "ns/name" -> where.
  for (size_t i = 0; i < out->pod_groups.size(); ++i) {
    const v1::PodGroup& g = out->pod_groups[i];
    const std::string& where = loader.group_where[i];
    const std::string key = absl::StrCat(g.meta().namespace_(), "/", g.meta().name());
    if (absl::Status s = validation::ValidatePodGroup(g); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": ", s.message()));
    }
    auto [it, added] = names.emplace(key, where);
    if (!added) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": metadata.name: duplicate pod group ",
                                                     validation::Printable(key), ", first in ", it->second));
    }
    if (absl::Status s = unique_uid(g.meta(), where); !s.ok()) return s;
    const size_t n = members[key];
    if (static_cast<size_t>(g.min_member()) > n) {
      out->warnings.push_back(absl::StrCat(where, ": minMember ", g.min_member(), " but only ", n,
                                           " pod(s) name pod group ", validation::Printable(key),
                                           ": its pods wait until enough members exist"));
    }
  }
  std::map<std::string, bool> warned;
  for (const PendingPod& p : loader.pods) {
    if (p.loaded.pod.pod_group().empty()) continue;
    const std::string key = absl::StrCat(p.loaded.pod.meta().namespace_(), "/", p.loaded.pod.pod_group());
    if (names.contains(key) || warned[key]) continue;
    warned[key] = true;
    out->warnings.push_back(absl::StrCat(p.where, ": names pod group ", validation::Printable(key),
                                         ", which does not exist: its pods wait until it does"));
  }
  return absl::OkStatus();
}

template <typename T>
void Stamp(T* obj, absl::Time base, int64_t* index) {
  v1::ObjectMeta* m = obj->mutable_meta();
  if (m->uid().empty()) m->set_uid(NewUid());
  if (m->creation_timestamp_us() == 0) m->set_creation_timestamp_us(absl::ToUnixMicros(base) + *index);
  ++*index;
}

}  // namespace

std::string NewUid() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  uint64_t a = rng(), b = rng();
  a = (a & 0xffffffffffff0fffULL) | 0x0000000000004000ULL;  // Version 4.
  b = (b & 0x3fffffffffffffffULL) | 0x8000000000000000ULL;  // Variant 10.
  return absl::StrFormat("%08x-%04x-%04x-%04x-%012x", a >> 32, (a >> 16) & 0xffff, a & 0xffff, b >> 48,
                         b & 0xffffffffffffULL);
}

absl::StatusOr<v1::Pod> PodFromYaml(const YAML::Node& object) {
  PodExtras extras;
  return Convert([&] { return ConvertPod(object, &extras); });
}
absl::StatusOr<v1::Node> NodeFromYaml(const YAML::Node& object) {
  return Convert([&] { return ConvertNode(object); });
}
absl::StatusOr<v1::PriorityClass> PriorityClassFromYaml(const YAML::Node& object) {
  return Convert([&] { return ConvertPriorityClass(object); });
}
absl::StatusOr<v1::PodDisruptionBudget> PodDisruptionBudgetFromYaml(const YAML::Node& object) {
  return Convert([&] { return ConvertPdb(object); });
}
absl::StatusOr<v1::Namespace> NamespaceFromYaml(const YAML::Node& object) {
  return Convert([&] { return ConvertNamespace(object); });
}
absl::StatusOr<v1::PodGroup> PodGroupFromYaml(const YAML::Node& object) {
  return Convert([&] { return ConvertPodGroup(object); });
}
absl::StatusOr<std::vector<v1::PodGroup>> PodGroupsFromWorkloadYaml(const YAML::Node& object) {
  return Convert([&] { return ConvertWorkload(object); });
}
absl::StatusOr<v1::ResourceList> ResourceListFromYaml(const YAML::Node& list) {
  return Convert([&] {
    v1::ResourceList out;
    ResourceList(list, "", &out);
    return out;
  });
}

absl::StatusOr<v1::Pod> PodFromJson(const boost::json::value& object) {
  PodExtras extras;
  return Convert([&] { return ConvertPod(JsonNode(object), &extras); });
}
absl::StatusOr<v1::Node> NodeFromJson(const boost::json::value& object) {
  return Convert([&] { return ConvertNode(JsonNode(object)); });
}
absl::StatusOr<v1::PriorityClass> PriorityClassFromJson(const boost::json::value& object) {
  return Convert([&] { return ConvertPriorityClass(JsonNode(object)); });
}
absl::StatusOr<v1::PodDisruptionBudget> PodDisruptionBudgetFromJson(const boost::json::value& object) {
  return Convert([&] { return ConvertPdb(JsonNode(object)); });
}
absl::StatusOr<v1::Namespace> NamespaceFromJson(const boost::json::value& object) {
  return Convert([&] { return ConvertNamespace(JsonNode(object)); });
}
absl::StatusOr<v1::PodGroup> PodGroupFromJson(const boost::json::value& object) {
  return Convert([&] { return ConvertPodGroup(JsonNode(object)); });
}
absl::StatusOr<std::vector<v1::PodGroup>> PodGroupsFromWorkloadJson(const boost::json::value& object) {
  return Convert([&] { return ConvertWorkload(JsonNode(object)); });
}

absl::StatusOr<LoadedCluster> LoadCluster(const std::vector<YamlSource>& sources, const LoadOptions& options) {
  Loader loader;
  for (const YamlSource& src : sources) {
    absl::Status s = loader.Source(src, options.yaml_limits);
    if (!s.ok()) return s;
  }
  absl::Status s = loader.ResolvePriorities();
  if (!s.ok()) return s;
  LoadedCluster out = std::move(loader.cluster);
  int64_t index = 0;
  for (auto& n : out.nodes) Stamp(&n, options.default_creation_time, &index);
  for (auto& pc : out.priority_classes) Stamp(&pc, options.default_creation_time, &index);
  for (auto& pdb : out.pdbs) Stamp(&pdb, options.default_creation_time, &index);
  for (auto& ns : out.namespaces) Stamp(&ns, options.default_creation_time, &index);
  for (auto& p : loader.pods) Stamp(&p.loaded.pod, options.default_creation_time, &index);
  for (auto& g : out.pod_groups) Stamp(&g, options.default_creation_time, &index);
  // A pod the files bind without a status.startTime has been running since
  // it was created (a dump of a cluster gives the kubelet's startTime).
  for (PendingPod& p : loader.pods) {
    v1::Pod& pod = p.loaded.pod;
    if (!pod.node_name().empty() && pod.start_time_us() == 0) {
      pod.set_start_time_us(pod.meta().creation_timestamp_us());
    }
  }

  // What the scheduler would refuse is refused here, with the file and
  // document: the same rules (adapters/common/validation), then what makes a
  // set of objects a cluster (unique names and uids).
  std::map<std::string, std::string> uids;  // uid -> where.
  auto unique_uid = [&](const v1::ObjectMeta& meta, const std::string& where) -> absl::Status {
    auto [it, added] = uids.emplace(meta.uid(), where);
    if (added) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(where, ": metadata.uid: \"", validation::Printable(meta.uid()),
                                                   "\" is also the uid of ", it->second));
  };
  auto refuse = [](const std::string& where, const absl::Status& s) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", s.message()));
  };
  std::map<std::string, std::string> node_names;
  for (size_t i = 0; i < out.nodes.size(); ++i) {
    const std::string& where = loader.node_where[i];
    if (absl::Status s = validation::ValidateNode(out.nodes[i]); !s.ok()) return refuse(where, s);
    auto [it, added] = node_names.emplace(out.nodes[i].meta().name(), where);
    if (!added) return absl::InvalidArgumentError(absl::StrCat(where, ": metadata.name: duplicate Node, first in ", it->second));
    if (absl::Status s = unique_uid(out.nodes[i].meta(), where); !s.ok()) return s;
  }
  for (size_t i = 0; i < out.priority_classes.size(); ++i) {
    const std::string& where = loader.class_where[i];
    if (absl::Status s = validation::ValidatePriorityClass(out.priority_classes[i]); !s.ok()) return refuse(where, s);
    if (absl::Status s = unique_uid(out.priority_classes[i].meta(), where); !s.ok()) return s;
  }
  std::map<std::string, std::string> namespace_names;
  for (size_t i = 0; i < out.namespaces.size(); ++i) {
    const std::string& where = loader.namespace_where[i];
    if (absl::Status s = validation::ValidateNamespace(out.namespaces[i]); !s.ok()) return refuse(where, s);
    auto [it, added] = namespace_names.emplace(out.namespaces[i].meta().name(), where);
    if (!added) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": metadata.name: duplicate Namespace, first in ", it->second));
    }
    if (absl::Status s = unique_uid(out.namespaces[i].meta(), where); !s.ok()) return s;
  }
  // PDBs too: before, one with a control character in its name passed the
  // loader and the scheduler refused it, its log line lost with --spawn.
  std::map<std::string, std::string> pdb_names;
  for (size_t i = 0; i < out.pdbs.size(); ++i) {
    const std::string& where = loader.pdb_where[i];
    if (absl::Status s = validation::ValidatePodDisruptionBudget(out.pdbs[i]); !s.ok()) return refuse(where, s);
    const v1::ObjectMeta& meta = out.pdbs[i].meta();
    auto [it, added] = pdb_names.emplace(absl::StrCat(meta.namespace_(), "/", meta.name()), where);
    if (!added) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": metadata.name: duplicate PodDisruptionBudget, first in ", it->second));
    }
    if (absl::Status s = unique_uid(meta, where); !s.ok()) return s;
  }
  std::map<std::string, std::string> pod_names;
  for (const PendingPod& p : loader.pods) {
    const v1::ObjectMeta& meta = p.loaded.pod.meta();
    if (absl::Status s = validation::ValidatePodSpec(p.loaded.pod); !s.ok()) return refuse(p.where, s);
    auto [it, added] = pod_names.emplace(absl::StrCat(meta.namespace_(), "/", meta.name()), p.where);
    if (!added) {
      return absl::InvalidArgumentError(absl::StrCat(p.where, ": metadata.name: duplicate Pod, first in ", it->second));
    }
    if (absl::Status s = unique_uid(meta, p.where); !s.ok()) return s;
  }
  // Replacements (kReplacesAnnotation): each names a pod of the files, in its
  // namespace, that is not a replacement itself; one replacement per pod.
  std::set<std::string> replacements;  // "ns/name" of the pods that are one.
  for (const PendingPod& p : loader.pods) {
    if (!p.loaded.replaces.empty()) {
      replacements.insert(absl::StrCat(p.loaded.pod.meta().namespace_(), "/", p.loaded.pod.meta().name()));
    }
  }
  const std::string replaces_field = absl::StrCat("metadata.annotations[", std::string(kReplacesAnnotation), "]");
  std::set<std::string> replaced;
  for (const PendingPod& p : loader.pods) {
    if (p.loaded.replaces.empty()) continue;
    const v1::ObjectMeta& meta = p.loaded.pod.meta();
    const std::string target = absl::StrCat(meta.namespace_(), "/", p.loaded.replaces);
    auto refused = [&](const std::string& why) {
      return absl::InvalidArgumentError(absl::StrCat(p.where, ": ", replaces_field, ": ", why));
    };
    if (p.loaded.create_later) {
      return refused(absl::StrCat("a replacement is not also ", std::string(kCreateLaterAnnotation)));
    }
    if (p.loaded.replaces == meta.name()) return refused("a pod cannot replace itself");
    if (!pod_names.contains(target)) return refused(absl::StrCat("no pod ", target, " in the files"));
    if (replacements.contains(target)) return refused(absl::StrCat(target, " is a replacement itself"));
    if (!replaced.insert(target).second) return refused(absl::StrCat(target, " has another replacement"));
  }

  if (absl::Status s = CheckPodGroups(loader, &out, unique_uid); !s.ok()) return s;

  out.pods.reserve(loader.pods.size());
  for (auto& p : loader.pods) out.pods.push_back(std::move(p.loaded));
  return out;
}

absl::StatusOr<LoadedCluster> LoadClusterPaths(const std::vector<std::string>& paths, const LoadOptions& options) {
  namespace fs = std::filesystem;
  std::vector<YamlSource> sources;
  auto read = [&](const fs::path& file) -> absl::Status {
    auto text = yaml::ReadFileBounded(file.string(), options.yaml_limits.max_bytes);
    if (!text.ok()) return text.status();
    sources.push_back({file.string(), *std::move(text)});
    return absl::OkStatus();
  };
  for (const std::string& path : paths) {
    std::error_code ec;
    if (fs::is_directory(path, ec)) {
      std::vector<fs::path> files;
      for (auto it = fs::recursive_directory_iterator(path, ec); !ec && it != fs::recursive_directory_iterator();
           it.increment(ec)) {
        std::string ext = it->path().extension().string();
        if (it->is_regular_file() && (ext == ".yaml" || ext == ".yml" || ext == ".json")) files.push_back(it->path());
      }
      if (ec) return absl::NotFoundError(absl::StrCat(path, ": ", ec.message()));
      std::sort(files.begin(), files.end());
      for (const auto& f : files) {
        absl::Status s = read(f);
        if (!s.ok()) return s;
      }
    } else {
      absl::Status s = read(path);
      if (!s.ok()) return s;
    }
  }
  return LoadCluster(sources, options);
}

absl::StatusOr<std::optional<absl::Duration>> SimTerminationGrace(const v1::Pod& pod) {
  auto it = pod.meta().annotations().find(std::string(kTerminationGraceAnnotation));
  if (it == pod.meta().annotations().end()) return std::nullopt;
  absl::Duration grace;
  if (!absl::ParseDuration(it->second, &grace) || grace < absl::ZeroDuration() || grace == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(absl::StrCat("metadata.annotations[", std::string(kTerminationGraceAnnotation),
                                                   "]: invalid duration \"", it->second,
                                                   "\" (want a finite one of at least zero, e.g. 500ms, 2s)"));
  }
  return grace;
}

}  // namespace podium::k8s

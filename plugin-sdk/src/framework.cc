#include "podium/sdk/framework.h"

#include <algorithm>

#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "podium/sdk/pod_affinity.h"

namespace podium::sdk {
namespace {
// Debian's Abseil has its own string_view: hash lookups need it, not std's.
absl::string_view AsAbsl(std::string_view s) { return absl::string_view(s.data(), s.size()); }
}  // namespace

std::string_view CodeName(Code code) {
  switch (code) {
    case Code::kSuccess:
      return "Success";
    case Code::kError:
      return "Error";
    case Code::kUnschedulable:
      return "Unschedulable";
    case Code::kUnschedulableAndUnresolvable:
      return "UnschedulableAndUnresolvable";
    case Code::kWait:
      return "Wait";
    case Code::kSkip:
      return "Skip";
    case Code::kPending:
      return "Pending";
  }
  return "Unknown";
}

// ---------------------------------------------------------------------------
// Status

std::string Status::Message() const { return absl::StrJoin(reasons_, ", "); }

void Status::ToProto(v1::Status* out) const {
  out->Clear();
  out->set_code(static_cast<v1::Status::Code>(static_cast<int>(code_)));
  for (const std::string& reason : reasons_) out->add_reasons(reason);
  out->set_plugin(plugin_);
}

Status Status::FromProto(const v1::Status& in) {
  std::vector<std::string> reasons(in.reasons().begin(), in.reasons().end());
  Code code;
  const int raw = static_cast<int>(in.code());
  if (raw >= static_cast<int>(Code::kSuccess) && raw <= static_cast<int>(Code::kPending)) {
    code = static_cast<Code>(raw);
  } else {
    // An unknown code from a newer peer: treat as an error, keep the reasons.
    code = Code::kError;
    reasons.push_back("unknown status code " + std::to_string(raw));
  }
  Status status(code, std::move(reasons));
  status.WithPlugin(in.plugin());
  return status;
}

// ---------------------------------------------------------------------------
// Resource

Resource Resource::FromProto(const v1::ResourceList& list) {
  Resource r;
  r.milli_cpu = list.milli_cpu();
  r.memory = list.memory_bytes();
  r.ephemeral_storage = list.ephemeral_storage_bytes();
  r.allowed_pod_number = list.pods();
  if (!list.scalar().empty()) {
    r.scalar.reserve(list.scalar().size());
    for (const auto& [name, value] : list.scalar()) r.scalar.emplace(name, value);
  }
  return r;
}

void Resource::Add(const Resource& other) {
  milli_cpu = SaturatingAdd(milli_cpu, other.milli_cpu);
  memory = SaturatingAdd(memory, other.memory);
  ephemeral_storage = SaturatingAdd(ephemeral_storage, other.ephemeral_storage);
  allowed_pod_number = SaturatingAdd(allowed_pod_number, other.allowed_pod_number);
  for (const auto& [name, value] : other.scalar) {
    int64_t& sum = scalar[name];
    sum = SaturatingAdd(sum, value);
  }
}

void Resource::Subtract(const Resource& other) {
  milli_cpu -= other.milli_cpu;
  memory -= other.memory;
  ephemeral_storage -= other.ephemeral_storage;
  allowed_pod_number -= other.allowed_pod_number;
  for (const auto& [name, value] : other.scalar) scalar[name] -= value;
}

void Resource::SetMax(const Resource& other) {
  milli_cpu = std::max(milli_cpu, other.milli_cpu);
  memory = std::max(memory, other.memory);
  ephemeral_storage = std::max(ephemeral_storage, other.ephemeral_storage);
  allowed_pod_number = std::max(allowed_pod_number, other.allowed_pod_number);
  for (const auto& [name, value] : other.scalar) {
    auto [it, inserted] = scalar.try_emplace(name, value);
    if (!inserted) it->second = std::max(it->second, value);
  }
}

int64_t Resource::Get(std::string_view name) const {
  if (name == "cpu") return milli_cpu;
  if (name == "memory") return memory;
  if (name == "ephemeral-storage") return ephemeral_storage;
  if (name == "pods") return allowed_pod_number;
  auto it = scalar.find(AsAbsl(name));
  return it == scalar.end() ? 0 : it->second;
}

// ---------------------------------------------------------------------------
// PodInfo

namespace {

// What one container contributes: its requests, and the same with
// kube-scheduler's defaults for cpu/memory when it requests none.
struct ContainerRequests {
  Resource requests;
  int64_t non_zero_milli_cpu = 0;
  int64_t non_zero_memory = 0;
};

ContainerRequests ForContainer(const v1::Container& c) {
  ContainerRequests out;
  out.requests = Resource::FromProto(c.requests());
  out.requests.allowed_pod_number = 0;
  out.non_zero_milli_cpu =
      out.requests.milli_cpu == 0 ? kDefaultMilliCpuRequest : out.requests.milli_cpu;
  out.non_zero_memory = out.requests.memory == 0 ? kDefaultMemoryRequest : out.requests.memory;
  return out;
}

void AddHostPorts(const v1::Container& c, std::vector<HostPort>& out) {
  for (const v1::ContainerPort& p : c.ports()) {
    if (p.host_port() <= 0) continue;
    HostPort hp;
    hp.ip = p.host_ip().empty() ? "0.0.0.0" : p.host_ip();
    hp.protocol = p.protocol().empty() ? "TCP" : p.protocol();
    hp.port = p.host_port();
    out.push_back(std::move(hp));
  }
}

}  // namespace

std::shared_ptr<const PodInfo> PodInfo::Create(v1::Pod pod) {
  auto info = std::make_shared<PodInfo>();

  // Regular containers and sidecars (restartable init containers) run together.
  Resource reqs;
  int64_t nz_cpu = 0, nz_mem = 0;
  for (const v1::Container& c : pod.containers()) {
    ContainerRequests cr = ForContainer(c);
    reqs.Add(cr.requests);
    nz_cpu = SaturatingAdd(nz_cpu, cr.non_zero_milli_cpu);
    nz_mem = SaturatingAdd(nz_mem, cr.non_zero_memory);
  }

  // Init containers run one at a time, each alongside the sidecars started
  // before it; the pod needs the largest of those moments.
  Resource init_max;
  int64_t init_nz_cpu = 0, init_nz_mem = 0;
  Resource sidecars;
  int64_t sidecars_nz_cpu = 0, sidecars_nz_mem = 0;
  for (const v1::Container& c : pod.init_containers()) {
    ContainerRequests cr = ForContainer(c);
    if (c.restartable()) {
      reqs.Add(cr.requests);
      nz_cpu = SaturatingAdd(nz_cpu, cr.non_zero_milli_cpu);
      nz_mem = SaturatingAdd(nz_mem, cr.non_zero_memory);
      sidecars.Add(cr.requests);
      sidecars_nz_cpu = SaturatingAdd(sidecars_nz_cpu, cr.non_zero_milli_cpu);
      sidecars_nz_mem = SaturatingAdd(sidecars_nz_mem, cr.non_zero_memory);
      init_max.SetMax(sidecars);
      init_nz_cpu = std::max(init_nz_cpu, sidecars_nz_cpu);
      init_nz_mem = std::max(init_nz_mem, sidecars_nz_mem);
    } else {
      Resource moment = cr.requests;
      moment.Add(sidecars);
      init_max.SetMax(moment);
      init_nz_cpu = std::max(init_nz_cpu, SaturatingAdd(cr.non_zero_milli_cpu, sidecars_nz_cpu));
      init_nz_mem = std::max(init_nz_mem, SaturatingAdd(cr.non_zero_memory, sidecars_nz_mem));
    }
  }
  reqs.SetMax(init_max);
  nz_cpu = std::max(nz_cpu, init_nz_cpu);
  nz_mem = std::max(nz_mem, init_nz_mem);

  if (pod.has_overhead()) {
    Resource overhead = Resource::FromProto(pod.overhead());
    overhead.allowed_pod_number = 0;
    reqs.Add(overhead);
    nz_cpu = SaturatingAdd(nz_cpu, overhead.milli_cpu);
    nz_mem = SaturatingAdd(nz_mem, overhead.memory);
  }

  for (const v1::Container& c : pod.containers()) AddHostPorts(c, info->host_ports);
  for (const v1::Container& c : pod.init_containers()) AddHostPorts(c, info->host_ports);

  info->requests = std::move(reqs);
  info->non_zero_milli_cpu = nz_cpu;
  info->non_zero_memory = nz_mem;
  info->affinity = PodAffinityTerms::ForPod(pod);
  info->pod = std::make_shared<const v1::Pod>(std::move(pod));
  return info;
}

// ---------------------------------------------------------------------------
// NodeInfo

NodeInfo::NodeInfo(uint32_t id, std::shared_ptr<const v1::Node> node) : id_(id) {
  SetNode(std::move(node));
}

void NodeInfo::SetNode(std::shared_ptr<const v1::Node> node) {
  node_ = std::move(node);
  allocatable_ = node_ ? Resource::FromProto(node_->allocatable()) : Resource();
}

void NodeInfo::AddPod(PodInfoPtr pod) {
  requested_.Add(pod->requests);
  non_zero_milli_cpu_ = SaturatingAdd(non_zero_milli_cpu_, pod->non_zero_milli_cpu);
  non_zero_memory_ = SaturatingAdd(non_zero_memory_, pod->non_zero_memory);
  used_ports_.insert(used_ports_.end(), pod->host_ports.begin(), pod->host_ports.end());
  if (pod->affinity != nullptr) {
    pods_with_affinity_.push_back(pod);
    if (!pod->affinity->required_anti_affinity.empty()) {
      pods_with_required_anti_affinity_.push_back(pod);
    }
  }
  pods_.push_back(std::move(pod));
}

bool NodeInfo::RemovePod(std::string_view uid) {
  auto it = std::find_if(pods_.begin(), pods_.end(),
                         [&](const PodInfoPtr& p) { return p->uid() == uid; });
  if (it == pods_.end()) return false;
  const PodInfo& pod = **it;
  requested_.Subtract(pod.requests);
  // Drop scalar entries that went back to zero so the map does not grow with
  // every extended resource ever seen.
  for (auto s = requested_.scalar.begin(); s != requested_.scalar.end();) {
    if (s->second == 0) {
      requested_.scalar.erase(s++);
    } else {
      ++s;
    }
  }
  non_zero_milli_cpu_ -= pod.non_zero_milli_cpu;
  non_zero_memory_ -= pod.non_zero_memory;
  // Remove one occurrence of each of the pod's ports (another pod may hold the
  // same port, e.g. an assumed pod during a dry run).
  for (const HostPort& hp : pod.host_ports) {
    auto p = std::find(used_ports_.begin(), used_ports_.end(), hp);
    if (p != used_ports_.end()) used_ports_.erase(p);
  }
  if (pod.affinity != nullptr) {
    for (std::vector<PodInfoPtr>* list : {&pods_with_affinity_, &pods_with_required_anti_affinity_}) {
      auto p = std::find_if(list->begin(), list->end(),
                            [&](const PodInfoPtr& q) { return q.get() == &pod; });
      if (p != list->end()) list->erase(p);
    }
  }
  // Order of the remaining pods is kept (plugins may rely on it for stable output).
  pods_.erase(it);
  return true;
}

const PodInfo* NodeInfo::FindPod(std::string_view uid) const {
  for (const PodInfoPtr& p : pods_) {
    if (p->uid() == uid) return p.get();
  }
  return nullptr;
}

// ---------------------------------------------------------------------------
// Snapshot

std::vector<const NodeInfo*> Snapshot::NodesHavingPodsWithAffinity() const {
  std::vector<const NodeInfo*> out;
  for (const NodeInfo* node : Nodes()) {
    if (!node->pods_with_affinity().empty()) out.push_back(node);
  }
  return out;
}

std::vector<const NodeInfo*> Snapshot::NodesHavingPodsWithRequiredAntiAffinity() const {
  std::vector<const NodeInfo*> out;
  for (const NodeInfo* node : Nodes()) {
    if (!node->pods_with_required_anti_affinity().empty()) out.push_back(node);
  }
  return out;
}

// ---------------------------------------------------------------------------
// CycleState

StateData* CycleState::Read(std::string_view key) const {
  for (const auto& [k, v] : data_) {
    if (k == key) return v.get();
  }
  return nullptr;
}

void CycleState::Write(std::string key, std::unique_ptr<StateData> data) {
  for (auto& [k, v] : data_) {
    if (k == key) {
      v = std::move(data);
      return;
    }
  }
  data_.emplace_back(std::move(key), std::move(data));
}

void CycleState::Delete(std::string_view key) {
  for (auto it = data_.begin(); it != data_.end(); ++it) {
    if (it->first == key) {
      data_.erase(it);
      return;
    }
  }
}

std::unique_ptr<CycleState> CycleState::Clone() const {
  auto out = std::make_unique<CycleState>();
  out->data_.reserve(data_.size());
  for (const auto& [key, value] : data_) {
    out->data_.emplace_back(key, value ? value->Clone() : nullptr);
  }
  out->skip_filter_plugins_ = skip_filter_plugins_;
  out->skip_score_plugins_ = skip_score_plugins_;
  return out;
}

}  // namespace podium::sdk

#include "batching/batcher.h"

#include <algorithm>
#include <optional>

#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/registry.h"

namespace podium::scheduler::batching {
namespace {

bool IsHit(BatchOutcome o) { return o == BatchOutcome::kHit || o == BatchOutcome::kHitUnschedulable; }

// Hits a probing batch serves before it decides whether its signature's
// verdicts would pay (Options::probe_what_if).
constexpr uint64_t kWhatIfProbeHits = 4;
// Signatures whose what-if judgment is remembered, per profile.
constexpr size_t kMaxWhatIfHistory = 4096;

bool IsMiss(BatchOutcome o) {
  return !IsHit(o) && o != BatchOutcome::kUnsignable && o != BatchOutcome::kDisabled;
}

// Labels, taints and images of the node, and the pods on it with affinity
// terms: what moves verdicts on other nodes when it changes.
uint64_t NodeFingerprint(const sdk::NodeInfo& node) {
  std::string bytes;
  const v1::Node& n = node.node();
  std::vector<std::pair<std::string_view, std::string_view>> labels(n.meta().labels().begin(),
                                                                    n.meta().labels().end());
  std::sort(labels.begin(), labels.end());
  for (const auto& [k, v] : labels) {
    absl::StrAppend(&bytes, k.size(), ":", std::string(k), v.size(), ":", std::string(v));
  }
  bytes.push_back('|');
  for (const auto& t : n.taints()) bytes.append(t.SerializeAsString()).push_back('|');
  bytes.push_back('|');
  for (const auto& i : n.images()) bytes.append(i.SerializeAsString()).push_back('|');
  bytes.push_back('|');
  for (const auto& p : node.pods_with_affinity()) absl::StrAppend(&bytes, p->pod->meta().uid(), ",");
  return absl::HashOf(bytes);
}

}  // namespace

std::string_view BatchOutcomeName(BatchOutcome outcome) {
  switch (outcome) {
    case BatchOutcome::kHit: return "hit";
    case BatchOutcome::kMissNew: return "miss_new";
    case BatchOutcome::kMissExhausted: return "miss_exhausted";
    case BatchOutcome::kMissStale: return "miss_stale";
    case BatchOutcome::kMissInvalidated: return "miss_invalidated";
    case BatchOutcome::kMissEmpty: return "miss_empty";
    case BatchOutcome::kMissRefused: return "miss_refused";
    case BatchOutcome::kMissFeasible: return "miss_feasible";
    case BatchOutcome::kMissWhatIf: return "miss_what_if";
    case BatchOutcome::kHitUnschedulable: return "hit_unschedulable";
    case BatchOutcome::kUnsignable: return "unsignable";
    case BatchOutcome::kDisabled: return "disabled";
  }
  return "unknown";
}

OpportunisticBatching::OpportunisticBatching(Options options, Clock& clock,
                                             prometheus::Registry* registry, uint64_t seed)
    : options_(options), clock_(clock), rng_(seed), failures_(options.max_age, clock, options.preemption_what_if_nodes) {
  if (registry != nullptr) {
    pods_family_ = &prometheus::BuildCounter()
                        .Name("podium_batch_pods_total")
                        .Help("Pods by what opportunistic batching did for them: hit (served from a "
                              "signature's ranking), miss_* (a full cycle, and why), unsignable, disabled")
                        .Register(*registry);
    unsignable_family_ = &prometheus::BuildCounter()
                              .Name("podium_batch_unsignable_pods_total")
                              .Help("Pods that could not be signed, by reason")
                              .Register(*registry);
  }
}

OpportunisticBatching::~OpportunisticBatching() = default;

void OpportunisticBatching::SetEnabled(const Framework* fw, bool enabled) { enabled_[fw] = enabled; }

void OpportunisticBatching::FlushAll() {
  failures_.InvalidateAll();
  nominated_verdicts_.clear();
  for (auto& [fw, profile] : profiles_) {
    for (Batch& batch : profile.batches) {
      batch.invalidated = true;
      batch.dirty.clear();
      batch.what_if.Clear();
      batch.own_changed.clear();
      batch.flushed = true;  // Its hits say nothing about the signature.
    }
  }
}

void OpportunisticBatching::Rank(Batch& batch, uint32_t node, Entry& entry) {
  std::vector<uint32_t>& group = batch.by_total[entry.total];
  entry.slot = static_cast<uint32_t>(group.size());
  group.push_back(node);
}

void OpportunisticBatching::Unrank(Batch& batch, const Entry& entry) {
  auto group = batch.by_total.find(entry.total);
  std::vector<uint32_t>& nodes = group->second;
  const uint32_t moved = nodes.back();
  nodes[entry.slot] = moved;
  batch.ranked.Find(moved)->slot = entry.slot;
  nodes.pop_back();
  if (nodes.empty()) batch.by_total.erase(group);
}

void OpportunisticBatching::Drop(Profile& profile, BatchList::iterator it) {
  if (&*it == last_served_) last_served_ = nullptr;
  if (!it->flushed && it->tracked_copies > 0 && it->hits > 0) {
    // What its verdicts decided, or (not asked) what they would have.
    RecordWhatIfPays(profile, it->key, (it->asked_what_if() ? it->what_if_hits : it->would_hits) * 2 >= it->hits);
  }
  profile.by_key.erase(it->key);
  profile.batches.erase(it);
}

void OpportunisticBatching::RecordWhatIfPays(Profile& profile, const std::string& key, bool pays) {
  if (profile.what_if_pays.size() >= kMaxWhatIfHistory && !profile.what_if_pays.contains(key)) {
    profile.what_if_pays.clear();
  }
  profile.what_if_pays[key] = pays;
}

void OpportunisticBatching::SnapshotUpdating() {
  for (auto& [fw, profile] : profiles_) profile.nominations_before_snapshot = fw->NominationsGeneration();
}

bool OpportunisticBatching::NominationsAsSnapshot(const Framework& fw) const {
  const std::optional<uint64_t> now = fw.NominationsGeneration();
  if (!now) return true;  // No nominator: nothing changes behind the snapshot's back.
  auto it = profiles_.find(&fw);
  return it != profiles_.end() && it->second.nominations_before_snapshot == now;
}

void OpportunisticBatching::SnapshotUpdated(const Snapshot& snapshot) {
  bool flush = false;
  if (snapshot.membership_generation() != membership_generation_) {
    // Nodes came or went: the rotation and every image's spread changed.
    membership_generation_ = snapshot.membership_generation();
    node_fingerprints_.clear();
    nodes_with_affinity_.clear();
    for (const sdk::NodeInfo* node : snapshot.Nodes()) {
      node_fingerprints_[node->id()] = NodeFingerprint(*node);
      if (!node->pods_with_affinity().empty()) nodes_with_affinity_.insert(node->id());
    }
    FlushAll();
    objects_generation_ = snapshot.objects_generation();
    return;
  }
  if (snapshot.objects_generation() != objects_generation_) {
    objects_generation_ = snapshot.objects_generation();
    flush = true;
  }
  for (uint32_t id : snapshot.last_update_changed()) {
    const sdk::NodeInfo* node = snapshot.GetById(id);
    if (node != nullptr && !node->pods_with_affinity().empty()) {
      nodes_with_affinity_.insert(id);
    } else {
      nodes_with_affinity_.erase(id);
    }
    if (node == nullptr) continue;
    const uint64_t fp = NodeFingerprint(*node);
    auto [it, inserted] = node_fingerprints_.try_emplace(id, fp);
    if (!inserted && it->second != fp) {
      it->second = fp;
      flush = true;
    }
  }
  if (flush) {
    FlushAll();
    return;
  }
  failures_.NodesChanged(snapshot.last_update_changed());
  for (auto& [fw, profile] : profiles_) {
    for (Batch& batch : profile.batches) {
      if (batch.invalidated) continue;
      for (uint32_t id : snapshot.last_update_changed()) {
        if (!batch.window.contains(id)) continue;
        if (const WhatIfNode* w = batch.what_if.Find(id)) {
          // Changed only by pods of ours (and confirmations that change
          // nothing): the node's what-if verdict stands in for a request.
          if (snapshot.NodeChangeGeneration(id) == w->change_generation) {
            if (w->assumed != w->applied) batch.own_changed.insert(id);
            continue;
          }
          batch.what_if.Erase(id);
          batch.own_changed.erase(id);
        }
        batch.dirty.insert(id);
      }
    }
  }
}

PodSignature OpportunisticBatching::Sign(Framework& fw, const Profile& profile, const v1::Pod& pod) const {
  const bool terms = !profile.signer.HasPartsReadThroughAffinityTerms() || !nodes_with_affinity_.empty() ||
                     fw.MayHaveNominations();
  return profile.signer.Sign(pod, terms);
}

OpportunisticBatching::Profile& OpportunisticBatching::ProfileFor(Framework& fw) {
  Profile& profile = profiles_[&fw];
  const uint64_t generation = fw.setup_generation();
  if (profile.setup_generation != generation) {
    // Plugins or processes changed (a late or re-registered endpoint): derive
    // the rules again and forget the rankings.
    const ProfileSpec spec = fw.spec();
    absl::flat_hash_map<std::string, v1::PluginRegistration> registrations;
    absl::flat_hash_map<PluginProcess*, v1::Registration> by_process;
    for (const auto& [plugin, process] : spec.processes) {
      auto [it, inserted] = by_process.try_emplace(process);
      if (inserted) it->second = process->registration();
      for (const auto& reg : it->second.plugins()) {
        if (reg.name() == plugin) registrations[plugin] = reg;
      }
    }
    profile.signer = Signer::ForProfile(spec, registrations);
    profile.what_if_copies = spec.what_if_copies;
    // Later lookaheads ride only where one process serves the profile and
    // answers them (otherwise their N* would be drawn for nothing).
    profile.later_lookaheads = by_process.size() == 1 && by_process.begin()->first->AnswersLaterLookaheads();
    profile.setup_generation = generation;
    last_served_ = nullptr;
    profile.batches.clear();
    profile.by_key.clear();
    failures_.ForgetProfile(&fw);
  }
  auto e = enabled_.find(&fw);
  profile.enabled = e == enabled_.end() || e->second;
  return profile;
}

absl::flat_hash_map<uint32_t, uint64_t> OpportunisticBatching::NominatedFingerprints(
    const Framework& fw, const v1::Pod& pod, const Snapshot& snapshot) const {
  // Per node, the sum of each nominated pod's hash: independent of the order
  // the nominator keeps them in. The key hook avoids copying every nominated
  // pod for every pod (preempt-500 spent a third of the scheduling thread there).
  absl::flat_hash_map<uint32_t, uint64_t> out;
  // The hook sums per node (the nominator keeps each pod's key), so a walk
  // costs a node, not a nominated pod (preempt-500: ~6 % of the scheduler).
  auto add = [&out](uint32_t node, uint64_t key_sum) { out[node] += key_sum; };
  if (fw.ForEachNominatedPodKey(pod, snapshot, add)) return out;
  google::protobuf::RepeatedPtrField<v1::MirroredPod> nominated;
  fw.AddNominatedPods(pod, snapshot, &nominated);
  for (const auto& m : nominated) add(m.node_id(), NominationKey(m.pod().meta().uid(), m.pod().meta().resource_version()));
  return out;
}

void OpportunisticBatching::Remember(Profile& profile, const std::string& key, const Framework& fw,
                                     const ScheduleResult& result, const Snapshot& snapshot,
                                     absl::flat_hash_map<uint32_t, uint64_t> nominated) {
  const Ranking& ranking = result.ranking;
  if (auto old = profile.by_key.find(key); old != profile.by_key.end()) Drop(profile, old->second);
  Batch batch;
  batch.key = key;
  batch.serial = ++next_serial_;
  const auto& nodes = snapshot.Nodes();
  const size_t n = nodes.size();
  const size_t evaluated = std::min<size_t>(result.evaluated_nodes, n);
  batch.window.reserve(evaluated);
  for (size_t k = 0; k < evaluated; ++k) batch.window.insert(nodes[(ranking.start_index + k) % n]->id());
  for (const auto& [plugin, scores] : ranking.scores) {
    batch.plugins.push_back(plugin);
    batch.normalizing.push_back(profile.signer.normalizing().contains(plugin));
  }
  std::vector<int64_t>& weights = batch.weights;
  for (const auto& plugin : batch.plugins) weights.push_back(profile.signer.Weight(plugin));
  // Node ids count up from 1: the last one bounds them.
  const size_t id_bound = snapshot.Nodes().empty() ? 0 : snapshot.Nodes().back()->id() + 1;
  batch.ranked.Reserve(id_bound);
  for (size_t k = 0; k < ranking.feasible.size(); ++k) {
    Entry e;
    e.scores.resize(batch.plugins.size());
    for (size_t p = 0; p < batch.plugins.size(); ++p) {
      const std::vector<int64_t>& s = ranking.scores.at(batch.plugins[p]);
      e.scores[p] = k < s.size() ? s[k] : 0;
      e.total += e.scores[p] * weights[p];
    }
    batch.window.insert(ranking.feasible[k]);
    Rank(batch, ranking.feasible[k], batch.ranked.Put(ranking.feasible[k], std::move(e)));
  }
  // What-if verdicts, when the cycle's process answered them for every score plugin.
  const uint32_t copies = ranking.what_if_copies;
  bool what_if = copies > 0 && ranking.what_if.size() == ranking.feasible.size() * copies;
  std::vector<const std::vector<int64_t>*> what_if_scores;
  for (size_t p = 0; what_if && p < batch.plugins.size(); ++p) {
    auto it = ranking.what_if_scores.find(batch.plugins[p]);
    what_if = it != ranking.what_if_scores.end() && it->second.size() == ranking.what_if.size();
    what_if_scores.push_back(what_if ? &it->second : nullptr);
  }
  if (what_if) {
    const size_t num_plugins = batch.plugins.size();
    batch.what_if_copies = copies;
    batch.tracked_copies = copies;
    batch.what_if_verdicts = ranking.what_if;
    batch.what_if_scores.resize(ranking.what_if.size() * num_plugins);
    for (size_t e = 0; e < ranking.what_if.size(); ++e) {
      for (size_t p = 0; p < num_plugins; ++p) batch.what_if_scores[e * num_plugins + p] = (*what_if_scores[p])[e];
    }
  } else {
    // Not asked (or not answered): the nodes are followed all the same, to
    // count the hits verdicts would have decided (Batch::would_hits).
    batch.tracked_copies = profile.what_if_copies;
  }
  if (batch.tracked_copies > 0) {
    batch.what_if.Reserve(id_bound);
    for (size_t k = 0; k < ranking.feasible.size(); ++k) {
      batch.what_if.Put(ranking.feasible[k],
                        WhatIfNode{.index = static_cast<uint32_t>(k),
                                   .change_generation = snapshot.NodeChangeGeneration(ranking.feasible[k])});
    }
  }
  batch.nominated = std::move(nominated);
  batch.capacity = ranking.feasible.size();
  batch.served = 1;  // The pod of the full cycle.
  batch.created = clock_.Now();
  profile.batches.push_front(std::move(batch));
  profile.by_key[key] = profile.batches.begin();
  while (profile.batches.size() > options_.max_batches_per_profile) {
    Drop(profile, std::prev(profile.batches.end()));
  }
}

bool OpportunisticBatching::PrepareLookahead(Framework& fw, Profile& profile, const Batch& batch,
                                             const sdk::PodInfoPtr& next, const Snapshot& snapshot,
                                             const NodeIdSet& updated,
                                             std::optional<uint32_t> star, const std::vector<uint64_t>& asked,
                                             const std::vector<uint32_t>& landing, bool first, bool pre_draw,
                                             LookaheadRequest& request, Lookahead& kept) {
  const v1::Pod& q = *next->pod;
  if (!q.pod_group().empty() || !q.nominated_node_name().empty()) return false;
  const PodSignature sig = Sign(fw, profile, q);
  if (!sig.signable || sig.key == batch.key || failures_.Has(&fw, sig.key)) return false;
  auto it = profile.by_key.find(sig.key);
  if (it == profile.by_key.end()) return false;
  const Batch& next_batch = *it->second;
  if (std::find(asked.begin(), asked.end(), next_batch.serial) != asked.end()) return false;
  // As TryBatch would find it: usable, and decidable without a request.
  if (next_batch.invalidated || next_batch.served >= next_batch.capacity ||
      clock_.Now() - next_batch.created > options_.max_age ||
      TooManyChanged(next_batch.dirty.size(), next_batch.window.size()) || !fw.DecidableWithoutRequest(q)) {
    return false;
  }
  // D_q: its dirty nodes, and own-changed nodes without a usable what-if
  // verdict (those with one are updated from it when q is decided).
  std::vector<uint32_t> now(next_batch.dirty.begin(), next_batch.dirty.end());
  std::vector<uint32_t> own_usable;
  for (uint32_t node : next_batch.own_changed) {
    if (next_batch.dirty.contains(node)) continue;
    const WhatIfNode* w = next_batch.what_if.Find(node);
    if (w == nullptr) continue;
    const uint32_t j = w->assumed;
    if (j == 0 || j > next_batch.what_if_copies ||
        next_batch.what_if_verdicts[w->index * next_batch.what_if_copies + j - 1] ==
            v1::WhatIfVerdicts::UNKNOWN) {
      now.push_back(node);
    } else {
      own_usable.push_back(node);
    }
  }
  std::sort(now.begin(), now.end());
  std::vector<uint32_t> after;
  std::vector<LookaheadRequest::ChainNode> chain_nodes;
  if (first) {
    // C_p within q's window.
    after.reserve(updated.size() + 1);
    for (uint32_t node : updated) {
      if (next_batch.window.contains(node)) after.push_back(node);
    }
    if (star && next_batch.window.contains(*star) && !updated.contains(*star)) after.push_back(*star);
    std::sort(after.begin(), after.end());
  } else {
    // The chain's speculated nodes within its window, each with its pods.
    for (size_t j = 0; j < landing.size(); ++j) {
      if (!next_batch.window.contains(landing[j])) continue;
      auto c = std::find_if(chain_nodes.begin(), chain_nodes.end(),
                            [&](const LookaheadRequest::ChainNode& n) { return n.node_id == landing[j]; });
      if (c == chain_nodes.end()) c = chain_nodes.insert(chain_nodes.end(), {landing[j], {}});
      c->pods.push_back(static_cast<uint32_t>(j));
    }
    std::sort(chain_nodes.begin(), chain_nodes.end(),
              [](const auto& a, const auto& b) { return a.node_id < b.node_id; });
  }
  if (now.empty() && after.empty() && chain_nodes.empty()) return false;  // q needs no request anyway.
  if (pre_draw) {
    // The nodes whose totals are known when it is decided, if the chain's
    // pods land as speculated: D_q, the landing nodes it looks at, and the
    // own-changed nodes its what-if verdicts update.
    NodeIdSet known;
    for (uint32_t node : now) known.insert(node);
    for (uint32_t node : landing) {
      if (next_batch.window.contains(node)) known.insert(node);
    }
    for (uint32_t node : own_usable) known.insert(node);
    kept.pre_drawn = DrawStar(next_batch, known);
    if (!kept.pre_drawn->star && !first) return false;  // Nothing for the chain to speculate on.
  }
  kept.pod = next;
  kept.fw = &fw;
  kept.batch_serial = next_batch.serial;
  kept.position = first ? 1 : landing.size();
  for (size_t i = 0; i < chain_nodes.size(); ++i) {
    kept.chain_entries.emplace_back(chain_nodes[i].node_id, now.size() + after.size() + i);
  }
  request.chain_nodes = std::move(chain_nodes);
  kept.generations.reserve(now.size() + after.size());
  for (uint32_t node : now) kept.generations[node] = snapshot.NodeChangeGeneration(node);
  for (uint32_t node : after) kept.generations[node] = snapshot.NodeChangeGeneration(node);
  request.pod = &q;
  request.node_ids = now;
  request.after_node_ids = after;
  kept.now_nodes = std::move(now);
  kept.after_nodes = std::move(after);
  return true;
}

bool OpportunisticBatching::LookaheadHolds(const Lookahead& lookahead, const Batch& batch,
                                           const std::vector<uint32_t>& nodes, const Snapshot& snapshot,
                                           std::vector<size_t>& entries) const {
  if (lookahead.batch_serial != batch.serial || lookahead.answer.pre_filter_rejected) return false;
  if (lookahead.position >= 2) {
    // A later lookahead: every pod of the chain before it landed as
    // speculated (Assumed), and the dirty nodes are D plus the chain's
    // nodes in the window, each moved by exactly the chain's assumes.
    if (!chain_ || chain_->assumed < lookahead.position) return false;
    std::vector<uint32_t> expected = lookahead.now_nodes;
    for (const auto& [node, entry] : lookahead.chain_entries) expected.push_back(node);
    std::sort(expected.begin(), expected.end());
    expected.erase(std::unique(expected.begin(), expected.end()), expected.end());
    if (nodes != expected) return false;
    entries.clear();
    entries.reserve(nodes.size());
    for (uint32_t node : nodes) {
      const uint64_t now = snapshot.NodeChangeGeneration(node);
      auto c = std::lower_bound(lookahead.chain_entries.begin(), lookahead.chain_entries.end(),
                                std::make_pair(node, size_t{0}));
      if (c != lookahead.chain_entries.end() && c->first == node) {
        auto e = chain_->expected.find(node);
        if (e == chain_->expected.end() || e->second != now) return false;
        entries.push_back(c->second);
      } else {
        auto recorded = lookahead.generations.find(node);
        if (recorded == lookahead.generations.end() || recorded->second != now) return false;
        entries.push_back(std::lower_bound(lookahead.now_nodes.begin(), lookahead.now_nodes.end(), node) -
                          lookahead.now_nodes.begin());
      }
      if (lookahead.answer.verdicts[entries.back()] == v1::WhatIfVerdicts::UNKNOWN) return false;
    }
    return ScoresEveryPerNodePlugin(lookahead.answer, batch);
  }
  // The dirty nodes must be D_q plus p's node (when q's batch looks at it).
  const bool p_node_counts = batch.window.contains(lookahead.p_node);
  size_t expected = lookahead.now_nodes.size();
  if (p_node_counts && !std::binary_search(lookahead.now_nodes.begin(), lookahead.now_nodes.end(), lookahead.p_node)) {
    ++expected;
  }
  if (nodes.size() != expected) return false;
  entries.clear();
  entries.reserve(nodes.size());
  for (uint32_t node : nodes) {
    auto recorded = lookahead.generations.find(node);
    if (recorded == lookahead.generations.end()) return false;
    const uint64_t now = snapshot.NodeChangeGeneration(node);
    if (node == lookahead.p_node) {
      // Moved by p's assume and nothing else.
      if (recorded->second != lookahead.before || now != lookahead.after) return false;
      auto a = std::lower_bound(lookahead.after_nodes.begin(), lookahead.after_nodes.end(), node);
      if (a == lookahead.after_nodes.end() || *a != node) return false;
      entries.push_back(lookahead.now_nodes.size() + (a - lookahead.after_nodes.begin()));
    } else {
      if (recorded->second != now) return false;
      auto d = std::lower_bound(lookahead.now_nodes.begin(), lookahead.now_nodes.end(), node);
      if (d == lookahead.now_nodes.end() || *d != node) return false;
      entries.push_back(d - lookahead.now_nodes.begin());
    }
    if (lookahead.answer.verdicts[entries.back()] == v1::WhatIfVerdicts::UNKNOWN) return false;
  }
  return ScoresEveryPerNodePlugin(lookahead.answer, batch);
}

bool OpportunisticBatching::ScoresEveryPerNodePlugin(const LookaheadAnswer& answer, const Batch& batch) {
  for (size_t p = 0; p < batch.plugins.size(); ++p) {
    if (!batch.normalizing[p] && !answer.scores.contains(batch.plugins[p])) return false;
  }
  return true;
}

OpportunisticBatching::StarDraw OpportunisticBatching::DrawStar(const Batch& batch, const NodeIdSet& updated) {
  StarDraw draw;
  absl::flat_hash_map<int64_t, size_t> updated_at;
  for (uint32_t node : updated) {
    if (const Entry* r = batch.ranked.Find(node)) ++updated_at[r->total];
  }
  for (const auto& [total, group] : batch.by_total) {
    auto u = updated_at.find(total);
    const size_t in_updated = u == updated_at.end() ? 0 : u->second;
    if (group.size() <= in_updated) continue;
    draw.total = total;
    draw.group = group.size() - in_updated;
    if (in_updated == 0) {
      draw.star = group[std::uniform_int_distribution<size_t>(0, group.size() - 1)(rng_)];
    } else if (draw.group * 4 >= group.size()) {
      // Mostly not updated: draw until one is not (a few draws).
      uint32_t pick;
      do {
        pick = group[std::uniform_int_distribution<size_t>(0, group.size() - 1)(rng_)];
      } while (updated.contains(pick));
      draw.star = pick;
    } else {
      std::vector<uint32_t> rest;
      rest.reserve(draw.group);
      for (uint32_t node : group) {
        if (!updated.contains(node)) rest.push_back(node);
      }
      draw.star = rest[std::uniform_int_distribution<size_t>(0, rest.size() - 1)(rng_)];
    }
    break;
  }
  return draw;
}

void OpportunisticBatching::ClearLookaheads() {
  lookaheads_.clear();
  chain_.reset();
}

void OpportunisticBatching::BreakChain() {
  chain_.reset();
  while (!lookaheads_.empty() && lookaheads_.back().position >= 2) lookaheads_.pop_back();
  for (Lookahead& l : lookaheads_) l.pre_drawn.reset();
}

BatchOutcome OpportunisticBatching::TryBatch(Framework& fw, Profile& profile, Batch& batch,
                                             const v1::Pod& pod, const Snapshot& snapshot,
                                             uint64_t state_seq, uint64_t cycle_id,
                                             ScheduleResult& result, bool& ran_cycle,
                                             const Lookahead* lookahead, const sdk::PodInfoPtr& next,
                                             const std::vector<sdk::PodInfoPtr>& later) {
  ran_cycle = false;
  if (batch.invalidated) return BatchOutcome::kMissInvalidated;
  if (batch.served >= batch.capacity) return BatchOutcome::kMissExhausted;
  if (clock_.Now() - batch.created > options_.max_age ||
      TooManyChanged(batch.dirty.size(), batch.window.size())) {
    return BatchOutcome::kMissStale;
  }
  // A probing batch (Options::probe_what_if) of a signature not judged yet:
  // after a few hits, whether verdicts would have decided most of them. If
  // so, the ranking is refreshed by a full cycle that asks for them.
  if (options_.probe_what_if && !batch.asked_what_if() && batch.tracked_copies > 0 &&
      batch.hits >= kWhatIfProbeHits && !profile.what_if_pays.contains(batch.key)) {
    const bool pays = batch.would_hits * 2 >= batch.hits;
    RecordWhatIfPays(profile, batch.key, pays);
    if (pays) return BatchOutcome::kMissWhatIf;
  }
  // Nodes whose nominated pods (as this pod counts them) changed are evaluated again.
  absl::flat_hash_map<uint32_t, uint64_t> nominated = NominatedFingerprints(fw, pod, snapshot);
  ForEachChangedNomination(batch.nominated, nominated, [&](uint32_t node) {
    if (batch.window.contains(node)) batch.dirty.insert(node);
  });
  // A node re-evaluated by request has no what-if verdict any more.
  for (uint32_t node : batch.dirty) {
    batch.what_if.Erase(node);
    batch.own_changed.erase(node);
  }
  // Nodes changed only by pods of ours take their what-if verdict j; one
  // without a verdict (UNKNOWN, or more pods than copies) is re-evaluated.
  // Not asked for verdicts: such a node is re-evaluated too, and counted as
  // one a verdict would have stood in for.
  const bool foreign_changes = !batch.dirty.empty();
  size_t would_be_own = 0;
  std::vector<uint32_t> own;
  own.reserve(batch.own_changed.size());
  for (uint32_t node : batch.own_changed) {
    WhatIfNode* w = batch.what_if.Find(node);
    if (w == nullptr) continue;
    const uint32_t j = w->assumed;
    if (j >= 1 && j <= batch.tracked_copies && !batch.asked_what_if()) {
      ++would_be_own;
      w->applied = j;
      batch.dirty.insert(node);
      continue;
    }
    if (j == 0 || j > batch.what_if_copies ||
        batch.what_if_verdicts[w->index * batch.what_if_copies + j - 1] == v1::WhatIfVerdicts::UNKNOWN) {
      batch.what_if.Erase(node);
      batch.dirty.insert(node);
      continue;
    }
    own.push_back(node);
  }
  batch.own_changed.clear();
  std::vector<uint32_t> nodes(batch.dirty.begin(), batch.dirty.end());
  std::sort(nodes.begin(), nodes.end());
  // The lookahead the previous pod's request brought for this one stands in
  // for the request when nothing but that pod's assume changed since.
  std::vector<size_t> lookahead_entries;
  const bool from_lookahead = lookahead != nullptr && !nodes.empty() &&
                              LookaheadHolds(*lookahead, batch, nodes, snapshot, lookahead_entries) &&
                              fw.DecidableWithoutRequest(pod);
  // The pick's first step (batcher.h "Lookahead verdicts"): N*, uniformly
  // among the best group's nodes that this hit does not update.
  NodeIdSet updated;
  updated.reserve(nodes.size() + own.size());
  for (uint32_t node : nodes) updated.insert(node);
  for (uint32_t node : own) updated.insert(node);
  // A lookahead pod of a chain draws no N* of its own: the request that
  // asked for it drew it, over the same nodes (the ones it updates now).
  const StarDraw draw =
      from_lookahead && lookahead->pre_drawn ? *lookahead->pre_drawn : DrawStar(batch, updated);
  const std::optional<uint32_t> star = draw.star;
  const int64_t star_total = draw.total;
  const size_t star_group = draw.group;
  // Even with nothing to re-evaluate, the pod's cycle runs PreFilter in its
  // processes when a plugin there runs for it after the cycle (Reserve and
  // Permit may read its state); otherwise no request at all.
  ScheduleResult scoped;
  const bool request = !from_lookahead && (!nodes.empty() || !fw.DecidableWithoutRequest(pod));
  std::deque<Lookahead> kept;
  std::optional<Chain> chain;
  if (request) {
    // A request's lookaheads replace any still held.
    ClearLookaheads();
    LookaheadRequest lookahead_request;
    Lookahead prepared;
    std::vector<uint64_t> asked = {batch.serial};
    // The chain: this pod speculated on N*, each lookahead pod on its own
    // pre-drawn N* (batcher.h "Later lookaheads").
    const bool chain_on =
        star.has_value() && profile.later_lookaheads && options_.later_lookaheads > 0 && !later.empty();
    std::vector<uint32_t> landing;
    if (star) landing.push_back(*star);
    const bool ask = next != nullptr && !nodes.empty() &&
                     PrepareLookahead(fw, profile, batch, next, snapshot, updated, star, asked, landing,
                                      /*first=*/true, /*pre_draw=*/chain_on, lookahead_request, prepared);
    // The later pods', in order, up to the first that does not qualify.
    std::vector<LookaheadRequest> later_requests;
    std::vector<Lookahead> later_prepared;
    if (ask && chain_on && prepared.pre_drawn && prepared.pre_drawn->star) {
      asked.push_back(prepared.batch_serial);
      landing.push_back(*prepared.pre_drawn->star);
      for (size_t k = 0; k < later.size() && k < options_.later_lookaheads; ++k) {
        LookaheadRequest r;
        Lookahead l;
        if (!PrepareLookahead(fw, profile, batch, later[k], snapshot, updated, star, asked, landing,
                              /*first=*/false, /*pre_draw=*/true, r, l)) {
          break;
        }
        asked.push_back(l.batch_serial);
        landing.push_back(*l.pre_drawn->star);
        later_requests.push_back(std::move(r));
        later_prepared.push_back(std::move(l));
      }
    }
    scoped = fw.SchedulePod(pod, snapshot, state_seq, cycle_id,
                            CycleScope{.node_ids = &nodes, .want_ranking = true,
                                       .lookahead = ask ? &lookahead_request : nullptr,
                                       .later_lookaheads = later_requests.empty() ? nullptr : &later_requests});
    ran_cycle = true;
    if (scoped.lookahead_sent) {
      absl::MutexLock lock(&stats_mu_);
      stats_.lookaheads_sent += 1 + scoped.later_lookaheads_sent;
    }
    if (scoped.outcome != ScheduleResult::Outcome::kScheduled) return BatchOutcome::kMissRefused;
    if (ask && scoped.lookahead) {
      prepared.answer = std::move(*scoped.lookahead);
      const bool later_answered =
          !later_prepared.empty() && scoped.later_lookaheads.size() == later_prepared.size();
      // Without a chain, q draws its N* when decided, as always.
      if (!later_answered) prepared.pre_drawn.reset();
      kept.push_back(std::move(prepared));
      if (later_answered) {
        for (size_t k = 0; k < later_prepared.size(); ++k) {
          later_prepared[k].answer = std::move(scoped.later_lookaheads[k]);
          kept.push_back(std::move(later_prepared[k]));
        }
        chain.emplace();
        chain->landing = landing;
        for (uint32_t node : landing) chain->expected.try_emplace(node, snapshot.NodeChangeGeneration(node));
      }
    }
  }
  bool any_normalizing = false;
  for (bool b : batch.normalizing) any_normalizing |= b;
  // One node's fresh verdict into the ranking: feasible with `score(p)` for
  // the plugins whose scores are per node, or not. False: the ranking cannot
  // absorb it (a normalizing plugin's scale would move).
  auto update = [&](uint32_t node, bool feasible, auto&& score) {
    Entry* r = batch.ranked.Find(node);
    if (!feasible) {
      if (r == nullptr) return true;  // Was and stays infeasible.
      // Leaves the ranking: a normalizing plugin's extreme would shift the scale.
      for (size_t p = 0; p < batch.plugins.size(); ++p) {
        if (!batch.normalizing[p]) continue;
        int64_t lo = r->scores[p], hi = lo;
        batch.ranked.ForEach([&](uint32_t, const Entry& e) {
          lo = std::min(lo, e.scores[p]);
          hi = std::max(hi, e.scores[p]);
        });
        if (lo != hi && (r->scores[p] == lo || r->scores[p] == hi)) return false;
      }
      Unrank(batch, *r);
      batch.ranked.Erase(node);
      return true;
    }
    if (r == nullptr) {
      // Joins the ranking: its normalized scores are unknown.
      if (any_normalizing) return false;
      r = &batch.ranked.Put(node, Entry{std::vector<int64_t>(batch.plugins.size(), 0), 0});
    } else {
      Unrank(batch, *r);
    }
    Entry& e = *r;
    e.total = 0;
    for (size_t p = 0; p < batch.plugins.size(); ++p) {
      if (!batch.normalizing[p]) e.scores[p] = score(p);
      e.total += e.scores[p] * batch.weights[p];
    }
    Rank(batch, node, e);
    return true;
  };
  if (request) {
    const Ranking& fresh = scoped.ranking;
    absl::flat_hash_map<uint32_t, size_t> fresh_index;
    for (size_t k = 0; k < fresh.feasible.size(); ++k) fresh_index[fresh.feasible[k]] = k;
    for (uint32_t node : nodes) {
      auto f = fresh_index.find(node);
      const bool ok = update(node, f != fresh_index.end(), [&](size_t p) -> int64_t {
        auto s = fresh.scores.find(batch.plugins[p]);
        return s != fresh.scores.end() && f->second < s->second.size() ? s->second[f->second] : 0;
      });
      if (!ok) return BatchOutcome::kMissInvalidated;
    }
  } else if (from_lookahead) {
    const LookaheadAnswer& answer = lookahead->answer;
    for (size_t k = 0; k < nodes.size(); ++k) {
      const size_t entry = lookahead_entries[k];
      const bool ok = update(nodes[k], answer.verdicts[entry] == v1::WhatIfVerdicts::FEASIBLE,
                             [&](size_t p) { return answer.scores.at(batch.plugins[p])[entry]; });
      if (!ok) return BatchOutcome::kMissInvalidated;
    }
  }
  const size_t num_plugins = batch.plugins.size();
  for (uint32_t node : own) {
    WhatIfNode& w = *batch.what_if.Find(node);
    const uint32_t j = w.assumed;
    const size_t entry = w.index * batch.what_if_copies + j - 1;
    const bool ok = update(node, batch.what_if_verdicts[entry] == v1::WhatIfVerdicts::FEASIBLE,
                           [&](size_t p) { return batch.what_if_scores[entry * num_plugins + p]; });
    if (!ok) return BatchOutcome::kMissInvalidated;
    w.applied = j;
  }
  batch.dirty.clear();
  batch.nominated = std::move(nominated);
  if (batch.ranked.empty()) return BatchOutcome::kMissEmpty;
  // The pick's second step: the best total M; ties at random, as the
  // framework's selectHost, N* standing for the g not-updated nodes at M.
  const int64_t best_total = batch.by_total.begin()->first;
  std::vector<uint32_t> updated_at_best;
  for (uint32_t node : updated) {
    if (const Entry* r = batch.ranked.Find(node); r != nullptr && r->total == best_total) {
      updated_at_best.push_back(node);
    }
  }
  std::sort(updated_at_best.begin(), updated_at_best.end());  // Same seed, same pick.
  uint32_t best;
  if (star && best_total == star_total) {
    const size_t r =
        std::uniform_int_distribution<size_t>(0, star_group + updated_at_best.size() - 1)(rng_);
    best = r < star_group ? *star : updated_at_best[r - star_group];
  } else if (!updated_at_best.empty()) {
    best = updated_at_best[std::uniform_int_distribution<size_t>(0, updated_at_best.size() - 1)(rng_)];
  } else {
    return BatchOutcome::kMissInvalidated;  // Cannot be: the best node is N* or an updated one.
  }
  const sdk::NodeInfo* chosen = snapshot.GetById(best);
  if (chosen == nullptr) return BatchOutcome::kMissInvalidated;
  ++batch.served;
  ++batch.hits;
  // Decided by the verdicts alone: no request, and no lookahead standing in for one.
  if (!request && !from_lookahead) ++batch.what_if_hits;
  // Would have been, had they been asked for.
  if (!foreign_changes && would_be_own > 0 && !from_lookahead && fw.DecidableWithoutRequest(pod)) {
    ++batch.would_hits;
  }
  if (request) {
    result = std::move(scoped);
    result.ranking = {};
    result.lookahead.reset();
  } else {
    result = ScheduleResult{};
    result.diagnosis.num_all_nodes = static_cast<uint32_t>(snapshot.NumNodes());
    result.diagnosis.cycle_id = cycle_id;
    fw.DecidedWithoutRequest(state_seq, cycle_id);
  }
  result.outcome = ScheduleResult::Outcome::kScheduled;
  result.node_name = chosen->name();
  result.feasible_nodes = static_cast<uint32_t>(batch.ranked.size());
  last_served_ = &batch;
  last_served_node_ = best;
  if (request) {
    for (Lookahead& l : kept) l.p_node = best;
    lookaheads_ = std::move(kept);
    chain_ = std::move(chain);
    if (chain_ && best != chain_->landing.front()) BreakChain();  // Not on N*: q's lookahead may still hold.
  }
  {
    absl::MutexLock lock(&stats_mu_);
    stats_.nodes_reevaluated += request ? nodes.size() : 0;
    stats_.what_if_verdicts += own.size();
    if (!request) ++stats_.hits_without_request;
    if (from_lookahead) ++stats_.lookahead_hits;
  }
  return BatchOutcome::kHit;
}

ScheduleResult OpportunisticBatching::ScheduleNominated(Framework& fw, Profile& profile, const v1::Pod& pod,
                                                        const Snapshot& snapshot, uint64_t state_seq,
                                                        uint64_t cycle_id, const sdk::PodInfoPtr& next,
                                                        const std::vector<sdk::PodInfoPtr>& later) {
  const std::string& uid = pod.meta().uid();
  const sdk::NodeInfo* own = snapshot.Get(pod.nominated_node_name());
  const uint64_t setup_generation = fw.setup_generation();
  // This pod's check, from an earlier pod's request: it stands when nothing
  // it was found on changed (the node, the nominations counted there, the
  // pod, the profile's plugins; a flush drops it). Only FEASIBLE ones are
  // kept: a pod that did not fit goes on to every node, which needs its own
  // request anyway.
  auto held = std::find_if(nominated_verdicts_.begin(), nominated_verdicts_.end(),
                           [&](const NominatedVerdict& v) { return v.uid == uid; });
  if (held != nominated_verdicts_.end()) {
    const NominatedVerdict v = std::move(*held);
    nominated_verdicts_.erase(held);
    if (v.fw == &fw && v.setup_generation == setup_generation &&
        v.resource_version == pod.meta().resource_version() && own != nullptr && own->id() == v.node_id &&
        snapshot.NodeChangeGeneration(v.node_id) == v.change_generation &&
        fw.NominatedKeyOn(pod, own->name()) == v.nominated_key && fw.DecidableWithoutRequest(pod)) {
      ScheduleResult result;
      result.outcome = ScheduleResult::Outcome::kScheduled;
      result.node_name = own->name();
      result.evaluated_nodes = 1;  // As the fast path: the rotation is not moved.
      result.feasible_nodes = 1;
      result.diagnosis.num_all_nodes = static_cast<uint32_t>(snapshot.NumNodes());
      result.diagnosis.cycle_id = cycle_id;
      fw.DecidedWithoutRequest(state_seq, cycle_id);
      absl::MutexLock lock(&stats_mu_);
      ++stats_.nominated_check_hits;
      return result;
    }
  }
  // The nominated pods after it, each on a node of its own (not this pod's):
  // their checks ride in this pod's request. Only pods whose verdicts depend
  // on their node alone (signable: with no pod (anti-)affinity or spread
  // constraint, another pod's assume elsewhere changes nothing for them),
  // with nothing to run remotely after the cycle, and only when the
  // nominations are the snapshot's (what the process counts).
  std::vector<NominatedCheckRequest> checks;
  std::vector<NominatedVerdict> pending;
  if (own != nullptr && options_.nominated_checks > 0 && NominationsAsSnapshot(fw) &&
      fw.NominatedKeyOn(pod, own->name()).has_value()) {
    absl::flat_hash_set<uint32_t> nodes = {own->id()};
    auto consider = [&](const sdk::PodInfoPtr& q) {
      const v1::Pod& p = *q->pod;
      if (p.nominated_node_name().empty() || !p.node_name().empty() || !p.pod_group().empty()) return;
      const sdk::NodeInfo* node = snapshot.Get(p.nominated_node_name());
      if (node == nullptr || !nodes.insert(node->id()).second) return;
      if (!profile.signer.Sign(p).signable || !fw.DecidableWithoutRequest(p)) return;
      checks.push_back(NominatedCheckRequest{.pod = &p, .node_id = node->id()});
      pending.push_back(NominatedVerdict{.fw = &fw,
                                         .setup_generation = setup_generation,
                                         .uid = p.meta().uid(),
                                         .resource_version = p.meta().resource_version(),
                                         .node_id = node->id(),
                                         .change_generation = snapshot.NodeChangeGeneration(node->id()),
                                         .nominated_key = *fw.NominatedKeyOn(p, node->name())});
    };
    if (next != nullptr) consider(next);
    for (size_t k = 0; k < later.size() && checks.size() < options_.nominated_checks; ++k) consider(later[k]);
  }
  ScheduleResult result = fw.SchedulePod(pod, snapshot, state_seq, cycle_id,
                                         CycleScope{.nominated_checks = checks.empty() ? nullptr : &checks});
  if (!checks.empty()) {
    nominated_verdicts_.clear();  // A request's checks replace any still held.
    if (result.nominated_checks.size() == pending.size()) {
      for (size_t k = 0; k < pending.size(); ++k) {
        if (result.nominated_checks[k] == v1::WhatIfVerdicts::FEASIBLE) {
          nominated_verdicts_.push_back(std::move(pending[k]));
        }
      }
    }
    absl::MutexLock lock(&stats_mu_);
    stats_.nominated_checks_sent += checks.size();
  }
  return result;
}

ScheduleResult OpportunisticBatching::SchedulePod(Framework& fw, const v1::Pod& pod,
                                                  const Snapshot& snapshot, uint64_t state_seq,
                                                  uint64_t& cycle_id,
                                                  const std::function<uint64_t()>& next_cycle_id,
                                                  sdk::PodInfoPtr next,
                                                  const std::vector<sdk::PodInfoPtr>& later) {
  last_served_ = nullptr;
  // The lookaheads the last hit's request brought hold only for the pods
  // they were taken for, popped in that order after that hit's pod was
  // assumed: the next one is this pod's, or none of them holds any more.
  std::optional<Lookahead> lookahead;
  if (!lookaheads_.empty()) {
    Lookahead& front = lookaheads_.front();
    if (front.pod->pod.get() == &pod && front.fw == &fw && front.assumed) {
      lookahead = std::move(front);
      lookaheads_.pop_front();
    } else {
      ClearLookaheads();
    }
  }
  Profile& profile = ProfileFor(fw);
  if (!profile.enabled) {
    Count(fw, last_outcome_ = BatchOutcome::kDisabled);
    return fw.SchedulePod(pod, snapshot, state_seq, cycle_id);
  }
  if (!pod.nominated_node_name().empty()) {
    // The nominated-node fast path (Framework::SchedulePod) decides it.
    static const std::string* const kNominated = new std::string("the pod has a nominated node");
    Count(fw, last_outcome_ = BatchOutcome::kUnsignable, kNominated);
    return ScheduleNominated(fw, profile, pod, snapshot, state_seq, cycle_id, next, later);
  }
  // Gang members are signed as any pod: the gang pass (schedule_gang.cc)
  // calls this per member on the snapshot with the earlier members assumed,
  // reports each assume (Assumed), and its undo is a node change like any.
  PodSignature sig = Sign(fw, profile, pod);
  if (!sig.signable) {
    Count(fw, last_outcome_ = BatchOutcome::kUnsignable, &sig.unsignable_reason);
    return fw.SchedulePod(pod, snapshot, state_seq, cycle_id);
  }
  BatchOutcome outcome = BatchOutcome::kMissNew;
  if (failures_.Has(&fw, sig.key)) {
    // The signature's last full cycle found no node (kept_failures.h).
    const bool as_snapshot = NominationsAsSnapshot(fw);
    ScheduleResult result;
    const uint64_t before = cycle_id;
    bool ran_cycle = false;
    const uint64_t what_if_hits = failures_.what_if_hits();
    const uint64_t what_if_gone_nodes = failures_.what_if_gone_nodes();
    const KeptFailures::Outcome kept =
        failures_.Serve(fw, sig.key, pod, snapshot, state_seq, cycle_id,
                        [&] { return NominatedFingerprints(fw, pod, snapshot); },
                        profile.nominations_before_snapshot, result, ran_cycle);
    if (failures_.what_if_gone_nodes() != what_if_gone_nodes) {
      absl::MutexLock lock(&stats_mu_);
      stats_.preemption_what_if_gone_nodes += failures_.what_if_gone_nodes() - what_if_gone_nodes;
    }
    if (kept == KeptFailures::Outcome::kServed) {
      // A nomination changed between the snapshot and Serve's look at the
      // nominations (the change log or the fingerprints): the pod's verdicts
      // are exact (a node whose nominations changed is re-evaluated), but
      // what is kept would not match what the plugin processes saw.
      if (!as_snapshot) failures_.Forget(&fw, sig.key);
      // The narrowed cycle did not end it: PostFilter will, if there is one.
      if (!fw.HasPostFilterPlugins()) fw.EndCycle(cycle_id);
      if (failures_.what_if_hits() != what_if_hits) {
        absl::MutexLock lock(&stats_mu_);
        ++stats_.preemption_what_if_hits;
      }
      Count(fw, last_outcome_ = BatchOutcome::kHitUnschedulable);
      return result;
    }
    if (ran_cycle) {
      fw.EndCycle(before);
      cycle_id = next_cycle_id();
    }
    outcome = kept == KeptFailures::Outcome::kStale      ? BatchOutcome::kMissStale
              : kept == KeptFailures::Outcome::kFeasible ? BatchOutcome::kMissFeasible
              : kept == KeptFailures::Outcome::kRefused  ? BatchOutcome::kMissRefused
                                                         : BatchOutcome::kMissInvalidated;
  } else if (auto it = profile.by_key.find(sig.key); it != profile.by_key.end()) {
    BatchList::iterator batch = it->second;
    profile.batches.splice(profile.batches.begin(), profile.batches, batch);  // Most recent first.
    ScheduleResult result;
    const uint64_t before = cycle_id;
    bool ran_cycle = false;
    outcome = TryBatch(fw, profile, *batch, pod, snapshot, state_seq, cycle_id, result, ran_cycle,
                       lookahead ? &*lookahead : nullptr, next, later);
    if (outcome == BatchOutcome::kHit) {
      Count(fw, last_outcome_ = outcome);
      return result;
    }
    Drop(profile, batch);
    // A re-evaluation ran under cycle_id and was dropped: end it, and run the
    // full cycle under a new id.
    if (ran_cycle) {
      fw.EndCycle(before);
      cycle_id = next_cycle_id();
    }
  }
  Count(fw, last_outcome_ = outcome);
  // The fingerprints cost a walk over every nomination: taken only for a
  // cycle whose result is kept (one that placed its pod on one of several
  // nodes, or found none), after it, and kept only when no nomination changed
  // while it ran. Without a generation hook, before the cycle as it saw them.
  const std::optional<uint64_t> generation = fw.NominationsGeneration();
  absl::flat_hash_map<uint32_t, uint64_t> nominated;
  if (!generation) nominated = NominatedFingerprints(fw, pod, snapshot);
  // Verdicts are asked for when the signature's last batch said they pay;
  // for a signature not judged yet, not when probing (its batch judges).
  uint32_t copies = profile.what_if_copies;
  if (auto pays = profile.what_if_pays.find(sig.key); pays != profile.what_if_pays.end()) {
    if (!pays->second) copies = 0;
  } else if (options_.probe_what_if) {
    copies = 0;
  }
  ScheduleResult result =
      fw.SchedulePod(pod, snapshot, state_seq, cycle_id,
                     CycleScope{.want_ranking = true, .examine_all = true, .what_if_copies = copies});
  // One feasible node: nothing to reuse (and no scores were asked for).
  if (result.outcome == ScheduleResult::Outcome::kScheduled && result.ranking.feasible.size() >= 2) {
    bool unchanged = true;
    if (generation) {
      nominated = NominatedFingerprints(fw, pod, snapshot);
      unchanged = fw.NominationsGeneration() == generation;  // Changed meanwhile: not reusable.
    }
    if (unchanged) {
      Remember(profile, sig.key, fw, result, snapshot, std::move(nominated));
      if (const sdk::NodeInfo* chosen = snapshot.Get(result.node_name)) {
        last_served_ = &profile.batches.front();
        last_served_node_ = chosen->id();
      }
    }
  } else if (result.outcome == ScheduleResult::Outcome::kUnschedulable) {
    // Fits no node: kept with the nominations the cycle saw, only when none
    // changed since the snapshot (as for a ranking).
    if (NominationsAsSnapshot(fw)) {
      failures_.Remember(fw, sig.key, pod, result, snapshot, generation, [&] {
        return generation ? NominatedFingerprints(fw, pod, snapshot) : std::move(nominated);
      });
    }
  }
  result.ranking = {};
  return result;
}

void OpportunisticBatching::Assumed(uint32_t node_id, uint64_t before, uint64_t after) {
  // The first assume after the hit that took the lookaheads is that hit's pod's.
  if (!lookaheads_.empty() && !lookaheads_.front().assumed) {
    if (lookaheads_.front().p_node == node_id) {
      for (Lookahead& l : lookaheads_) {
        l.assumed = true;
        l.before = before;
        l.after = after;
      }
    } else {
      ClearLookaheads();
    }
  }
  // Each assume of the chain's pods, in order, on its speculated node.
  if (chain_) {
    if (lookaheads_.empty()) {
      chain_.reset();  // Nothing rides on the rest of it.
    } else if (auto e = chain_->expected.find(node_id);
               chain_->assumed < chain_->landing.size() && chain_->landing[chain_->assumed] == node_id &&
               e != chain_->expected.end() && e->second == before) {
      e->second = after;
      ++chain_->assumed;
    } else {
      BreakChain();
    }
  }
  Batch* batch = last_served_;
  last_served_ = nullptr;
  if (batch == nullptr || node_id != last_served_node_) return;
  WhatIfNode* w = batch->what_if.Find(node_id);
  if (w == nullptr) return;
  // Something else changed the node since the batch last knew it, or it
  // holds more of our pods than the verdicts cover: an ordinary dirty node
  // from now on (the coming snapshot update marks it).
  if (before != w->change_generation || w->assumed >= batch->tracked_copies) {
    batch->what_if.Erase(node_id);
    batch->own_changed.erase(node_id);
    return;
  }
  ++w->assumed;
  w->change_generation = after;
}

void OpportunisticBatching::Count(const Framework& fw, BatchOutcome outcome, const std::string* reason) {
  {
    absl::MutexLock lock(&stats_mu_);
    if (IsHit(outcome)) ++stats_.hits;
    if (IsMiss(outcome)) ++stats_.misses;
    if (outcome == BatchOutcome::kUnsignable) {
      ++stats_.unsignable;
      if (reason != nullptr && (stats_.unsignable_reasons.contains(*reason) ||
                                stats_.unsignable_reasons.size() < options_.max_unsignable_reasons)) {
        ++stats_.unsignable_reasons[*reason];
      }
    }
    ++stats_.by_outcome[std::string(BatchOutcomeName(outcome))];
  }
  if (pods_family_ == nullptr) return;
  auto [it, inserted] = pod_counters_.try_emplace({&fw, static_cast<int>(outcome)}, nullptr);
  if (inserted) {
    it->second = &pods_family_->Add({{"profile", fw.name()}, {"result", std::string(BatchOutcomeName(outcome))}});
  }
  it->second->Increment();
  if (outcome == BatchOutcome::kUnsignable && reason != nullptr) {
    absl::MutexLock lock(&stats_mu_);
    if (stats_.unsignable_reasons.contains(*reason)) {
      unsignable_family_->Add({{"profile", fw.name()}, {"reason", *reason}}).Increment();
    }
  }
}

BatchStats OpportunisticBatching::stats() const {
  absl::MutexLock lock(&stats_mu_);
  return stats_;
}

}  // namespace podium::scheduler::batching

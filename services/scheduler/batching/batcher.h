// Opportunistic batching, beyond KEP-5598. For each pod signature (signature.h)
// the batcher keeps the last full cycle's ranking: every feasible node that
// cycle examined with each score plugin's score. The next pod of the same
// signature costs one request that re-evaluates only the examined nodes that
// changed since (the node the previous pod was assumed on, nodes touched by
// cluster events, nodes whose nominated pods changed); the pod then takes the
// best node of the updated ranking. KEP-5598 gives up once the chosen node
// stays feasible; here that node is re-scored and batching goes on, so
// several pods per node work too.
//
// Exactness. A re-evaluated node gets fresh Filter verdicts and fresh scores
// from plugins whose scores are per node. Scores a plugin normalizes across
// nodes (SignatureSpec.normalizes_scores) are kept from the full cycle: a
// signing plugin's raw score for a node changes only with what flushes every
// batch below. A node that leaves the ranking while holding a normalizing
// plugin's lowest or highest score, or a node that joins it, would shift the
// normalization: the ranking is refreshed instead.
//
// The full cycle of a signature's first pod finds every feasible node
// (CycleScope::examine_all), not percentageOfNodesToScore's share: that rule
// bounds what one pod costs, and a ranking that serves many pods amortizes a
// complete look. Batched pods thus go to the best node of the whole cluster,
// which a full cycle's window of nodes only approximates (on basic-5000 every
// node ends with 2 or 3 pods). Unsignable pods, and profiles with batching
// off, keep the rule and the rotating start; a complete look leaves the
// rotation where it was.
//
// A ranking is refreshed (the pod gets a full cycle, counted as a miss):
//  - exhausted: it placed as many pods as it had feasible nodes, so no
//    ranking outlives one pod per node;
//  - stale: older than Options::max_age (1 s), or more of its nodes changed
//    than a full cycle would cost to look at (half of them, at least 64);
//  - invalidated: a node was added or removed; a node's labels, taints or
//    images changed; a pod with (anti-)affinity terms came, went or moved;
//    PodDisruptionBudgets or PodGroups changed (these change verdicts on
//    nodes other than their own); the profile's plugins or processes changed;
//  - empty: no node of the ranking is feasible any more;
//  - refused: the re-evaluation failed (PreFilter rejected the pod, or an error);
//  - what_if: a probing batch found that what-if verdicts (below) would
//    decide most of its hits: the full cycle asks for them.
//
// A full cycle that finds no node is kept too (kept_failures.h), under the
// same rules: the next pod of the signature re-evaluates only the changed
// nodes and, when none passes, gets the full cycle's diagnosis
// (hit_unschedulable); when one passes, a full cycle (miss_feasible).
// What-if verdicts (plugin protocol version 3). The full cycle of a
// signature they pay for (Options::probe_what_if) also asks, for
// every feasible node, what Filter and Score would say with j = 1 ..
// ProfileSpec::what_if_copies (PodiumConfiguration profiles[].whatIfCopies,
// default 2) more copies of the pod there. A node whose only
// change since is j such pods of this batch assumed there (followed by the
// cache's change generation of the node: each assume of ours is recorded
// with the generation before and after it, and a bind confirmation that
// changes nothing a plugin sees keeps the generation) takes verdict j
// instead of being re-evaluated. Anything else touching the node (another
// pod, a cluster event, a nomination, a forgotten assume, more than
// what_if_copies pods of ours) makes it an ordinary dirty node, re-evaluated
// by a request, for the rest of the batch. When no node needs a request and
// no remote plugin runs for the pod after the cycle (Reserve, Permit,
// binding: Framework::DecidableWithoutRequest), the pod is decided with no
// plugin round trip. The copies are the request's pod under uids of their
// own: the batch's later pods carry the same signature, so their parts that
// the signing plugins read are the copies'. Verdicts come only from processes
// that speak protocol 3: one process serving the profile's filter and score
// plugins, or every process of a fan-out (each a filtering one), merged as
// the cycle merges (infeasible anywhere is infeasible, unknown anywhere is
// unknown, scores per plugin from its process); otherwise hits re-evaluate.
//
// Lookahead verdicts (plugin protocol version 4). With signatures
// interleaved (basic-5000-mixed: 40 of them), a hit finds the nodes where
// the other signatures' pods landed since its last pod dirty, and what-if
// verdicts do not cover them: every hit made a request. So a hit's request
// for pod p also asks for the verdicts of the pod q at activeQ's head (peeked,
// not popped) when q will be a hit of another signature: on the nodes q's
// hit would re-evaluate now (D_q: its batch's dirty nodes and own-changed
// nodes without a usable what-if verdict), and on each node p can end on
// (C_p) with p added there. C_p is small because p's pick is drawn in two
// steps: before the request, N*, uniformly among the nodes of the best group
// of the ranking that the hit does not update; after it, the best total M:
// when M is N*'s total, N* with probability g / (g + d) (g: the not-updated
// nodes at M, N*'s group; d: the updated ones at M), else one of the d;
// when M is higher, one of the updated nodes at M. That is a uniform choice
// among the ties, as before, and p's node is one of the updated nodes or
// N* (every hit picks this way). When q is popped next and the only change
// in its batch since the request is p's assume (its dirty nodes are D_q and
// p's node, each other node's change generation as at the request, p's
// node moved by exactly p's assume), q takes the lookahead verdicts (D_q's as
// they were, p's node's "with p") through the same update as a request's
// and is decided with no request. Anything else (a cluster event, another
// pod, a nomination, another pod popped, p's request failed or p not
// assumed) drops the lookahead: q's hit is served as without it. Sent only
// when one process serves the profile's filter and score plugins, speaks
// version 4, and the request carries no nominated pods (the plugin also
// leaves it unanswered while it mirrors any nomination): nominated pods'
// accounting stays out of it. The lookahead pod's PreFilter state lives
// only in that request (no cycle id: no remote plugin runs for q after its
// cycle, Framework::DecidableWithoutRequest). Counted in
// BatchStats::lookaheads_sent and lookahead_hits (per pod asked, per pod
// decided).
//
// Later lookaheads (plugin protocol version 5). The same request also asks
// for the pods after q in activeQ's order (r, s, ...: Options::
// later_lookaheads of them), each of a batch of its own (not p's, not q's,
// not another's of the request), as a chain that speculates where each pod
// lands: its N*, drawn before the request (Lookahead::pre_drawn: for q among
// its best group minus D_q, N*_p and the own-changed nodes its verdicts
// update, i.e. the nodes whose totals it knows when decided if p lands on
// N*_p; for r the same with the N* of p and q; and so on). r is asked on
// D_r as it is and on chain nodes: the N* of the pods before it that its
// window holds, each with the pods expected there added (v1::ChainNode). At
// r's pop its lookahead stands when every pod before it was assumed on its
// N* (Chain: each assume moving that node's change generation by exactly
// itself) and its batch's dirty nodes are exactly D_r and the chain nodes,
// the others' generations as recorded; r then picks with its pre-drawn N*
// (the same two-step uniform choice over the same nodes). A pod that lands
// elsewhere breaks the chain (BreakChain): the pods after it ask as they
// would have; q's own lookahead (all of C_p) still holds. A pod that is
// not the next expected one drops every lookahead still held, and any
// request of a later pod replaces them. Only where one process serves the
// profile and speaks version 5 (Profile::later_lookaheads).
// Not thread-safe: the scheduling thread owns it (stats() is thread-safe).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "batching/kept_failures.h"
#include "batching/node_id_map.h"
#include "batching/node_id_set.h"
#include "batching/signature.h"
#include "cache/snapshot.h"
#include "framework/framework.h"
#include "queue/clock.h"

namespace prometheus {
class Registry;
template <typename T>
class Family;
class Counter;
}  // namespace prometheus

namespace podium::scheduler::batching {

// Why a pod was not served from a batch, or that it was.
enum class BatchOutcome {
  kHit,
  kMissNew,          // No ranking for its signature yet.
  kMissExhausted,
  kMissStale,
  kMissInvalidated,
  kMissEmpty,
  kMissRefused,
  kMissFeasible,     // Its signature's kept failure (kept_failures.h) has a feasible node now.
  kMissWhatIf,       // Its signature's probing batch found that what-if verdicts would pay: refreshed to ask.
  kHitUnschedulable, // Served from its signature's kept failure: fits no node, as before.
  kUnsignable,
  kDisabled,         // The profile turned batching off.
};
std::string_view BatchOutcomeName(BatchOutcome outcome);

struct BatchStats {
  uint64_t hits = 0;
  uint64_t misses = 0;  // Every kMiss*.
  uint64_t unsignable = 0;
  absl::flat_hash_map<std::string, uint64_t> by_outcome;           // BatchOutcomeName -> pods.
  absl::flat_hash_map<std::string, uint64_t> unsignable_reasons;   // reason -> pods.
  uint64_t nodes_reevaluated = 0;  // Over every hit.
  uint64_t what_if_verdicts = 0;   // Nodes of hits that took a what-if verdict instead.
  uint64_t hits_without_request = 0;  // Hits decided with no plugin request.
  uint64_t lookaheads_sent = 0;  // Pods whose lookahead verdicts a request asked for.
  uint64_t lookahead_hits = 0;   // Hits decided by a lookahead (also in hits_without_request).
  uint64_t nominated_checks_sent = 0;  // Pods checked on their nominated node in another pod's request.
  uint64_t nominated_check_hits = 0;   // Pods decided by such a check, with no request of their own.
  // Pods that fit nowhere served from the what-ifs an earlier pod's request
  // asked (its nomination the only change since), with no request.
  uint64_t preemption_what_if_hits = 0;
  // Changed nodes of pods that fit nowhere that took a what-if of pods gone
  // (an in-flight preemption's victims deleted) instead of a request.
  uint64_t preemption_what_if_gone_nodes = 0;
};

class OpportunisticBatching {
 public:
  struct Options {
    absl::Duration max_age = absl::Seconds(1);
    size_t max_batches_per_profile = 64;
    // Bounds the label set of podium_batch_unsignable_pods_total.
    size_t max_unsignable_reasons = 64;
    // What-if verdicts are asked for a signature only once a batch of it
    // showed they pay: its first full cycle asks for none, and its batch
    // counts the hits verdicts would have decided (Batch::would_hits); after
    // kWhatIfProbeHits hits, if they are at least half, the signature is
    // judged to pay and the ranking is refreshed by a full cycle that asks
    // (miss_what_if); if not, it is judged not to. Off (tests): the first
    // full cycle asks.
    bool probe_what_if = true;
    // Pods after the lookahead pod that a hit's request also asks verdicts
    // for (plugin protocol version 5, "Later lookaheads" above); 0: only the
    // lookahead pod. basic-5000-mixed, three rounds each: 0 -> 3 346 pods/s,
    // 2 -> 4 470, 4 -> 4 711, 8 -> 5 142, 12 -> 5 265, 16 -> 5 311.
    size_t later_lookaheads = 8;
    // Nominated pods after a nominated pod that its request also checks on
    // their own nominated nodes (plugin protocol version 6, "Nominated-node
    // checks" above); 0: none.
    size_t nominated_checks = 16;
    // Candidate walks whose picks a kept failure's narrowed cycle predicts
    // and asks preemption what-ifs for (up to twice as many nodes; plugin
    // protocol version 7, "Preemption what-ifs" in the README): the
    // next preemptor of the signature needs no request when the one before
    // it was nominated to one of them and nothing else changed; 0: none.
    uint32_t preemption_what_if_nodes = 8;
  };

  // `registry` may be null (no metrics).
  OpportunisticBatching(Options options, Clock& clock, prometheus::Registry* registry,
                        uint64_t seed = std::random_device{}());
  ~OpportunisticBatching();

  // Right before every Cache::UpdateSnapshot of the scheduling snapshot: the
  // nominations' generation, so that a kept failure is kept only with
  // fingerprints of the nominations its cycle saw (plugin processes see them
  // through the snapshot's delta log).
  void SnapshotUpdating();
  // After every Cache::UpdateSnapshot of the scheduling snapshot: what changed
  // marks or invalidates the rankings.
  void SnapshotUpdated(const Snapshot& snapshot);

  // A profile's batching switch (config: opportunisticBatching). On by default.
  void SetEnabled(const Framework* fw, bool enabled);
  bool Enabled(const Framework* fw) const {
    auto e = enabled_.find(fw);
    return e == enabled_.end() || e->second;
  }

  // Framework::SchedulePod, served from the pod's signature's ranking when it
  // can be. `cycle_id` may be replaced by `next_cycle_id()` when a
  // re-evaluation is dropped for a full cycle (the dropped cycle is ended).
  // `next`: the pod at activeQ's head (not popped), when it belongs to the
  // same profile: a hit's request may carry its lookahead; `later`: the pods
  // after it in activeQ's order (same profile), whose later lookaheads it
  // may carry too.
  ScheduleResult SchedulePod(Framework& fw, const v1::Pod& pod, const Snapshot& snapshot,
                             uint64_t state_seq, uint64_t& cycle_id,
                             const std::function<uint64_t()>& next_cycle_id,
                             sdk::PodInfoPtr next = nullptr, const std::vector<sdk::PodInfoPtr>& later = {});

  // The pod of the last SchedulePod was assumed on node `node_id`, moving
  // its change generation (Snapshot::NodeChangeGeneration) from `before` to
  // `after` (Cache::AssumedAt). Follows the batch's own pods for what-if.
  void Assumed(uint32_t node_id, uint64_t before, uint64_t after);

  BatchStats stats() const;
  size_t later_lookaheads() const { return options_.later_lookaheads; }
  // How many pods after `pod` in activeQ SchedulePod may use (`next` and `later`).
  size_t upcoming_for(const v1::Pod& pod) const {
    return pod.nominated_node_name().empty() ? 1 + options_.later_lookaheads
                                             : std::max(1 + options_.later_lookaheads, options_.nominated_checks);
  }
  // Kept failures, over every profile (tests).
  size_t num_kept_failures() const { return failures_.size(); }
  // The outcome of the last SchedulePod (tests).
  BatchOutcome last_outcome() const { return last_outcome_; }

 private:
  struct Entry {
    std::vector<int64_t> scores;  // Aligned with Batch::plugins.
    int64_t total = 0;
    uint32_t slot = 0;  // Its index in Batch::by_total[total].
  };
  // A node's what-if verdicts from the full cycle, kept while its only
  // change since is pods of this batch assumed there.
  struct WhatIfNode {
    uint32_t index = 0;  // Its position in the full cycle's feasible nodes.
    uint64_t change_generation = 0;  // The node's, with `assumed` pods of ours on it.
    uint32_t assumed = 0;  // Pods of this batch assumed there since the full cycle.
    uint32_t applied = 0;  // The j whose verdict the ranking holds.
  };
  struct Batch {
    std::string key;
    uint64_t serial = 0;  // Unique per batch: a lookahead names the batch it was taken for.
    NodeIdSet window;  // Nodes the full cycle examined.
    NodeIdMap<Entry> ranked;  // The feasible ones.
    // The ranked nodes grouped by total, best first: a hit picks at random
    // in the first group instead of scanning every node (on basic-5000 the
    // scan was a tenth of the scheduler's CPU).
    std::map<int64_t, std::vector<uint32_t>, std::greater<int64_t>> by_total;
    std::vector<std::string> plugins;
    std::vector<bool> normalizing;  // Aligned with plugins.
    std::vector<int64_t> weights;   // Aligned with plugins (the profile's).
    NodeIdSet dirty;
    NodeIdMap<WhatIfNode> what_if;
    uint32_t what_if_copies = 0;
    // Node at index i with j copies: verdict [i * copies + j - 1], score of
    // plugin p [(i * copies + j - 1) * plugins + p] (aligned with plugins).
    std::vector<v1::WhatIfVerdicts::Verdict> what_if_verdicts;
    std::vector<int64_t> what_if_scores;
    // Whether its full cycle asked for verdicts (and got them: Remember sets
    // what_if_copies only then), and the hits the verdicts decided (no
    // request, no lookahead); not asked, the hits they would have decided
    // (nothing but our own pods changed the nodes the request re-evaluated,
    // within tracked_copies each, and no lookahead stood in): whether asking
    // pays for this signature (Profile::what_if_pays).
    bool asked_what_if() const { return what_if_copies > 0; }
    uint64_t hits = 0;
    uint64_t what_if_hits = 0;
    uint64_t would_hits = 0;
    // Pods of ours per node that `what_if` follows: what_if_copies when
    // asked, the profile's copies when not (0: nodes are not followed).
    uint32_t tracked_copies = 0;
    bool flushed = false;  // By FlushAll: its hits judge nothing.
    // Nodes with pods of ours assumed whose verdict the ranking does not hold yet.
    NodeIdSet own_changed;
    absl::flat_hash_map<uint32_t, uint64_t> nominated;  // node -> fingerprint.
    size_t capacity = 0;
    size_t served = 0;
    absl::Time created;
    bool invalidated = false;  // By a cluster change that moves other nodes' verdicts.
  };
  using BatchList = std::list<Batch>;  // Most recently used first.
  // A lookahead answered in the last hit's request, for the pod expected next.
  // The first step of a hit's pick: N*, drawn uniformly among the best
  // group's nodes the hit does not update (g of them, at `total`).
  struct StarDraw {
    std::optional<uint32_t> star;
    int64_t total = 0;
    size_t group = 0;
  };
  struct Lookahead {
    sdk::PodInfoPtr pod;  // Held: its address identifies the pod when popped.
    const Framework* fw = nullptr;
    uint64_t batch_serial = 0;
    // In the request's chain: 1 for the lookahead pod (q), k + 2 for
    // later_lookaheads[k].
    size_t position = 1;
    std::vector<uint32_t> now_nodes;    // D_q, sorted.
    std::vector<uint32_t> after_nodes;  // C_p within the batch's window, sorted (q only).
    // Later lookaheads: the chain's speculated nodes within the window,
    // sorted, each with its entry in the answer.
    std::vector<std::pair<uint32_t, size_t>> chain_entries;
    absl::flat_hash_map<uint32_t, uint64_t> generations;  // Of now and after nodes, at the request.
    // Its own N*, drawn at the request (later lookaheads ride on it): among
    // the best group minus the nodes whose totals it will know when decided
    // if the chain lands as speculated. Used for its pick then; dropped
    // when the chain breaks.
    std::optional<StarDraw> pre_drawn;
    LookaheadAnswer answer;
    uint32_t p_node = 0;  // The node the request's pod took.
    bool assumed = false;  // Assumed there, from generation `before` to `after`.
    uint64_t before = 0;
    uint64_t after = 0;
  };
  // The pods of the last request's chain (its pod, then each lookahead
  // pod's) on their speculated nodes (their N*), and how many were assumed
  // there so far, each node's change generation moving by exactly their
  // assumes (`expected`).
  struct Chain {
    std::vector<uint32_t> landing;
    size_t assumed = 0;
    absl::flat_hash_map<uint32_t, uint64_t> expected;
  };
  struct Profile {
    uint64_t setup_generation = ~uint64_t{0};
    Signer signer = Signer::Unsignable("not derived yet");
    bool enabled = true;
    std::optional<uint64_t> nominations_before_snapshot;  // SnapshotUpdating's.
    uint32_t what_if_copies = 0;
    bool later_lookaheads = false;  // Its lone process answers them (protocol version 5).
    // Per signature, whether what-if verdicts pay: whether its last batch
    // served at least half its hits by them, or (not asked) would have
    // (Batch::would_hits). When not (batches broken by other signatures'
    // pods, as in basic-5000-mixed), full cycles skip them: a full cycle
    // with verdicts evaluates every feasible node copies + 1 times (on
    // basic-5000-mixed a fifth of the plugin host's CPU). Lookahead hits do
    // not count either way: they make no request without verdicts too.
    // Absent: not judged yet (Options::probe_what_if).
    absl::flat_hash_map<std::string, bool> what_if_pays;
    BatchList batches;
    absl::flat_hash_map<std::string, BatchList::iterator> by_key;
  };

  // Keep Batch::by_total in step with a ranked entry's total.
  static void Rank(Batch& batch, uint32_t node, Entry& entry);
  static void Unrank(Batch& batch, const Entry& entry);
  Profile& ProfileFor(Framework& fw);
  // The pod's signature; parts read only through pod (anti-)affinity terms
  // are left out while no assigned pod (nodes_with_affinity_) and no
  // nominated pod (Framework::MayHaveNominations) could have such a term.
  PodSignature Sign(Framework& fw, const Profile& profile, const v1::Pod& pod) const;
  // No nomination changed since SnapshotUpdating (true without a nominator).
  bool NominationsAsSnapshot(const Framework& fw) const;
  void Drop(Profile& profile, BatchList::iterator it);
  static void RecordWhatIfPays(Profile& profile, const std::string& key, bool pays);
  void FlushAll();
  // Builds a ranking from a full cycle's result (scheduled, with two or more feasible nodes).
  void Remember(Profile& profile, const std::string& key, const Framework& fw,
                const ScheduleResult& result, const Snapshot& snapshot,
                absl::flat_hash_map<uint32_t, uint64_t> nominated);
  absl::flat_hash_map<uint32_t, uint64_t> NominatedFingerprints(const Framework& fw, const v1::Pod& pod,
                                                                 const Snapshot& snapshot) const;
  // Serves the pod from `batch`, or says why not (result untouched then).
  // `ran_cycle`: a re-evaluation ran under cycle_id (to be ended on a miss).
  // `lookahead`: the one taken for this pod, if any; `next`: the pod whose
  // lookahead a request may carry.
  BatchOutcome TryBatch(Framework& fw, Profile& profile, Batch& batch, const v1::Pod& pod,
                        const Snapshot& snapshot, uint64_t state_seq, uint64_t cycle_id,
                        ScheduleResult& result, bool& ran_cycle, const Lookahead* lookahead,
                        const sdk::PodInfoPtr& next, const std::vector<sdk::PodInfoPtr>& later);
  // The lookahead of `next` for a request of `batch`'s pod that updates
  // `updated` and may end on `star`; false when `next` does not qualify
  // (also when its batch is one of `asked`: the batches of the request's
  // earlier lookaheads, whose hits change them before `next` is decided).
  // `landing`: the speculated nodes of the chain's pods before `next` (by
  // position). The first lookahead (`first`) is asked on C_p (`updated`,
  // `star`); a later one on chain nodes (its window's landing nodes, each
  // with the pods speculated there). `pre_draw`: draw its N* now
  // (Lookahead::pre_drawn).
  bool PrepareLookahead(Framework& fw, Profile& profile, const Batch& batch, const sdk::PodInfoPtr& next,
                        const Snapshot& snapshot, const NodeIdSet& updated,
                        std::optional<uint32_t> star, const std::vector<uint64_t>& asked,
                        const std::vector<uint32_t>& landing, bool first, bool pre_draw,
                        LookaheadRequest& request, Lookahead& kept);
  StarDraw DrawStar(const Batch& batch, const NodeIdSet& updated);
  void ClearLookaheads();
  // A chain pod did not land as speculated: the later lookaheads go, and
  // the pre-drawn N* of the one still held.
  void BreakChain();
  // Whether `lookahead` stands for a request re-evaluating `nodes` (sorted)
  // of `batch`; `entries`: each node's entry in its answer.
  bool LookaheadHolds(const Lookahead& lookahead, const Batch& batch, const std::vector<uint32_t>& nodes,
                      const Snapshot& snapshot, std::vector<size_t>& entries) const;
  // Whether `answer` scores for every plugin of the ranking whose scores are
  // per node (a normalizing one's are not taken from it).
  static bool ScoresEveryPerNodePlugin(const LookaheadAnswer& answer, const Batch& batch);
  void Count(const Framework& fw, BatchOutcome outcome, const std::string* reason = nullptr);

  const Options options_;
  Clock& clock_;
  std::mt19937_64 rng_;
  absl::flat_hash_map<const Framework*, Profile> profiles_;
  absl::flat_hash_map<const Framework*, bool> enabled_;
  KeptFailures failures_;
  // What each node looked like at the last update: a change of these
  // invalidates every ranking (they move verdicts of other nodes).
  absl::flat_hash_map<uint32_t, uint64_t> node_fingerprints_;
  // Nodes with a pod that has pod (anti-)affinity terms, at the last update.
  absl::flat_hash_set<uint32_t> nodes_with_affinity_;
  uint64_t membership_generation_ = ~uint64_t{0};
  uint64_t objects_generation_ = ~uint64_t{0};
  BatchOutcome last_outcome_ = BatchOutcome::kDisabled;
  // The batch and node of the pod the last SchedulePod placed from a ranking
  // (a hit, or the full cycle that made the ranking): Assumed follows it.
  Batch* last_served_ = nullptr;
  uint32_t last_served_node_ = 0;
  uint64_t next_serial_ = 0;
  // A nominated pod's verdict on its nominated node, checked in another
  // pod's request, with what it was found on ("Nominated-node checks").
  struct NominatedVerdict {
    const Framework* fw = nullptr;
    uint64_t setup_generation = 0;
    std::string uid;
    std::string resource_version;
    uint32_t node_id = 0;
    uint64_t change_generation = 0;  // The node's, in the request's snapshot.
    uint64_t nominated_key = 0;      // Framework::NominatedKeyOn, then.
  };
  // The nominated-node fast path of a nominated pod: decided by its check
  // when one holds, else its own request, carrying the checks of the
  // nominated pods after it.
  ScheduleResult ScheduleNominated(Framework& fw, Profile& profile, const v1::Pod& pod, const Snapshot& snapshot,
                                   uint64_t state_seq, uint64_t cycle_id, const sdk::PodInfoPtr& next,
                                   const std::vector<sdk::PodInfoPtr>& later);
  // The FEASIBLE checks of the last request that carried any (entries are
  // used once; a flush drops them all).
  std::vector<NominatedVerdict> nominated_verdicts_;
  // Taken by the last hit's request: its lookahead pod's first, then the
  // later ones', in the order the pods are expected to be popped.
  std::deque<Lookahead> lookaheads_;
  std::optional<Chain> chain_;

  prometheus::Family<prometheus::Counter>* pods_family_ = nullptr;
  prometheus::Family<prometheus::Counter>* unsignable_family_ = nullptr;
  absl::flat_hash_map<std::pair<const Framework*, int>, prometheus::Counter*> pod_counters_;

  mutable absl::Mutex stats_mu_;
  BatchStats stats_ ABSL_GUARDED_BY(stats_mu_);
};

}  // namespace podium::scheduler::batching

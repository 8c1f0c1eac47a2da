#include "cache/mirror_state_source.h"

namespace podium::scheduler {

bool CacheStateSource::ReadDelta(uint64_t from_seq, uint64_t to_seq, v1::StateDelta* out) {
  const uint64_t at = cache_.ReadDelta(from_seq, to_seq, out);
  // A reset at another position would not match the snapshot: send ours.
  return !(out->reset() && at != to_seq);
}

void CacheStateSource::FullState(uint64_t to_seq, v1::StateDelta* out) {
  out->Clear();
  out->set_reset(true);
  out->set_generation(to_seq);
  for (const sdk::NodeInfo* node : snapshot_.Nodes()) {
    auto* n = out->add_node_upserts();
    n->set_id(node->id());
    *n->mutable_node() = node->node();
    for (const auto& pod : node->pods()) {
      auto* p = out->add_pod_upserts();
      p->set_node_id(node->id());
      *p->mutable_pod() = *pod->pod;
      p->set_assumed(cache_.IsAssumed(pod->uid()));
    }
  }
  for (const auto& pdb : snapshot_.pdbs()) *out->add_pdb_upserts() = *pdb;
  for (const auto& group : snapshot_.pod_groups()) *out->add_pod_group_upserts() = *group;
  for (const auto& ns : snapshot_.namespaces()) *out->add_namespace_upserts() = *ns;
  // Nominations are not in the snapshot: those of now (later deltas repeat
  // every change after to_seq, so the mirror converges).
  cache_.AddNominations(out);
}

void CacheStateSource::SetMirrorPosition(const void* mirror, std::optional<uint64_t> position) {
  cache_.SetMirrorPosition(mirror, position);
}

}  // namespace podium::scheduler

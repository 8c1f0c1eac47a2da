// A set of node ids (Cache ids: small, dense, counted up from 1) as a bitmap
// with its members listed in insertion order. A batch asks "is this node in
// the window / dirty?" for every changed node of every update, for every
// batch of the profile: on basic-5000-mixed (40 signatures) the hash sets
// that answered it were a tenth of the scheduling thread.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace podium::scheduler::batching {

class NodeIdSet {
 public:
  bool contains(uint32_t id) const {
    const size_t word = id / 64;
    return word < bits_.size() && (bits_[word] >> (id % 64) & 1) != 0;
  }
  // True when the id was not a member.
  bool insert(uint32_t id) {
    const size_t word = id / 64;
    if (word >= bits_.size()) bits_.resize(word + 1, 0);
    const uint64_t mask = uint64_t{1} << (id % 64);
    if ((bits_[word] & mask) != 0) return false;
    bits_[word] |= mask;
    members_.push_back(id);
    return true;
  }
  // Linear in the members: for the small sets (dirty, own-changed nodes).
  void erase(uint32_t id) {
    if (!contains(id)) return;
    bits_[id / 64] &= ~(uint64_t{1} << (id % 64));
    members_.erase(std::find(members_.begin(), members_.end(), id));
  }
  void clear() {
    for (uint32_t id : members_) bits_[id / 64] = 0;
    members_.clear();
  }
  void reserve(size_t n) { members_.reserve(n); }
  size_t size() const { return members_.size(); }
  bool empty() const { return members_.empty(); }
  // In insertion order.
  std::vector<uint32_t>::const_iterator begin() const { return members_.begin(); }
  std::vector<uint32_t>::const_iterator end() const { return members_.end(); }

 private:
  std::vector<uint64_t> bits_;
  std::vector<uint32_t> members_;
};

}  // namespace podium::scheduler::batching

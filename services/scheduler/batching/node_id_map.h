// A map from node ids (Cache ids: small, dense, counted up from 1) to values,
// stored densely by id. A batch's ranking and what-if entries hold every
// feasible node of its signature (thousands), and every update and every hit
// looks some of them up for each of up to 64 batches: as hash maps those
// lookups were the scheduling thread's top cost on basic-5000-mixed once the
// later lookaheads had removed most plugin requests (cache misses, a fifth of
// its samples).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace podium::scheduler::batching {

template <typename T>
class NodeIdMap {
 public:
  T* Find(uint32_t id) { return Has(id) ? &values_[id] : nullptr; }
  const T* Find(uint32_t id) const { return Has(id) ? &values_[id] : nullptr; }
  bool Has(uint32_t id) const { return id < present_.size() && present_[id] != 0; }
  // Inserts or replaces.
  T& Put(uint32_t id, T value) {
    if (id >= values_.size()) {
      values_.resize(id + 1);
      present_.resize(id + 1, 0);
    }
    if (present_[id] == 0) {
      present_[id] = 1;
      ++size_;
    }
    values_[id] = std::move(value);
    return values_[id];
  }
  void Erase(uint32_t id) {
    if (!Has(id)) return;
    present_[id] = 0;
    values_[id] = T{};
    --size_;
  }
  void Clear() {
    values_.clear();
    present_.clear();
    size_ = 0;
  }
  // Room for ids below `n` without growing.
  void Reserve(size_t n) {
    values_.reserve(n);
    present_.reserve(n);
  }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // f(id, value) for every entry, in id order.
  template <typename F>
  void ForEach(F&& f) const {
    for (uint32_t id = 0; id < present_.size(); ++id) {
      if (present_[id] != 0) f(id, values_[id]);
    }
  }

 private:
  std::vector<T> values_;
  std::vector<uint8_t> present_;
  size_t size_ = 0;
};

}  // namespace podium::scheduler::batching

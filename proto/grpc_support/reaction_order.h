#pragma once

// Tells ThreadSanitizer the order gRPC's callback API guarantees between a
// reactor's operations and their reactions: StartRead happens before its
// OnReadDone, StartWrite before its OnWriteDone, every reaction before
// OnDone. gRPC keeps that order with atomics inside its uninstrumented
// libraries (the completion queue, the call combiner), so under TSan a
// reactor's own fields, written before StartRead on one thread and read in
// OnReadDone on another, look unordered.
//
// One ReactionOrder per reactor. Call BeforeStart right before each
// StartRead/StartWrite/StartWritesDone/Finish/StartCall, and the matching
// Enter* first thing in each reaction (keep the returned Reaction until the
// reaction returns). Each operation kind has its own address, so a read's
// completion is ordered only after reads, never after an unrelated
// StartWrite: a real race between our read and write paths is still
// reported. Without -fsanitize=thread every call is a no-op.

#if defined(__SANITIZE_THREAD__)
#define PODIUM_REACTION_ORDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define PODIUM_REACTION_ORDER_TSAN 1
#endif
#endif

#ifdef PODIUM_REACTION_ORDER_TSAN
#include <sanitizer/tsan_interface.h>
#endif

namespace podium::grpc_support {

class ReactionOrder {
 public:
  enum class Op { kRead, kWrite, kWritesDone, kFinish };

  // Released when the scope of one reaction ends; OnDone acquires it.
  class Reaction {
   public:
    explicit Reaction(ReactionOrder& order) : order_(order) {}
    Reaction(const Reaction&) = delete;
    Reaction& operator=(const Reaction&) = delete;
    ~Reaction() { Release(&order_.key_[kReturned]); }

   private:
    ReactionOrder& order_;
  };

  ReactionOrder() = default;
  ReactionOrder(const ReactionOrder&) = delete;
  ReactionOrder& operator=(const ReactionOrder&) = delete;

  // Once the reactor is fully built, before gRPC can call it (a server
  // reactor: at the end of its constructor; a client one: before StartCall).
  void Constructed() { Release(&key_[kConstructed]); }

  // Right before starting `op` on the reactor.
  void BeforeStart(Op op) { Release(&key_[Index(op)]); }

  // First thing in OnReadDone / OnWriteDone / OnWritesDoneDone.
  [[nodiscard]] Reaction EnterReadDone() { return Enter(Op::kRead); }
  [[nodiscard]] Reaction EnterWriteDone() { return Enter(Op::kWrite); }
  [[nodiscard]] Reaction EnterWritesDoneDone() { return Enter(Op::kWritesDone); }

  // First thing in OnCancel: it follows no operation of ours, only the
  // reactor's construction.
  [[nodiscard]] Reaction EnterCancel() {
    Acquire(&key_[kConstructed]);
    return Reaction(*this);
  }

  // First thing in OnDone: gRPC calls it after every operation completed and
  // every other reaction returned.
  void EnterDone() {
    for (char& key : key_) Acquire(&key);
  }

 private:
  enum : int { kConstructed = 4, kReturned = 5, kKeys = 6 };

  static constexpr int Index(Op op) { return static_cast<int>(op); }

  Reaction Enter(Op op) {
    Acquire(&key_[kConstructed]);
    Acquire(&key_[Index(op)]);
    return Reaction(*this);
  }

#ifdef PODIUM_REACTION_ORDER_TSAN
  static void Release(char* key) { __tsan_release(key); }
  static void Acquire(char* key) { __tsan_acquire(key); }
#else
  static void Release(char*) {}
  static void Acquire(char*) {}
#endif

  // Only the addresses matter: one per operation kind, the construction and
  // the end of a reaction.
  char key_[kKeys] = {};
};

}  // namespace podium::grpc_support

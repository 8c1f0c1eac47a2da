#include "reflector/reflector.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/fake_transport.h"

namespace podium::kube {
namespace {

std::string Pod(const std::string& name, const std::string& uid, const std::string& rv,
                const std::string& phase = "Pending", const std::string& cpu = "100m") {
  return absl::StrCat(R"({"metadata":{"name":")", name, R"(","namespace":"default","uid":")", uid,
                      R"(","resourceVersion":")", rv, R"("},"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":")",
                      cpu, R"("}}}]},"status":{"phase":")", phase, R"("}})");
}

std::string List(const std::vector<std::string>& items, const std::string& rv, const std::string& next = "",
                 const std::string& kind = "PodList") {
  return absl::StrCat(R"({"kind":")", kind, R"(","metadata":{"resourceVersion":")", rv, R"(")",
                      next.empty() ? "" : absl::StrCat(R"(,"continue":")", next, R"(")"), R"(},"items":[)",
                      absl::StrJoin(items, ","), "]}");
}

std::string Event(const std::string& type, const std::string& object) {
  return absl::StrCat(R"({"type":")", type, R"(","object":)", object, "}");
}

// What the sink heard, as "UPSERT default/a" lines.
class RecordingSink : public ReflectorSink {
 public:
  explicit RecordingSink(const FakeTransport* transport = nullptr) : transport_(transport) {}
  void OnListPage(const ResourceKind&, std::vector<v1::ObjectEvent> events) override {
    std::vector<std::string> page;
    for (const auto& e : events) {
      initial.push_back(Describe(e));
      page.push_back(Describe(e));
    }
    // How many requests the reflector had made when this page reached us.
    pages.push_back(absl::StrCat(transport_ ? transport_->requests.size() : 0, ": ", absl::StrJoin(page, " ")));
  }
  void OnListPartDone(const ResourceKind&, size_t part) override {
    parts_done.push_back(part);
    pages.push_back(absl::StrCat("part ", part, " done"));
  }
  void OnEvents(const ResourceKind&, std::vector<v1::ObjectEvent> events) override {
    for (const auto& e : events) changes.push_back(Describe(e));
    if (on_events) on_events();
  }
  void OnBadObject(const ResourceKind&, const boost::json::value& object, const absl::Status& error) override {
    bad.push_back(absl::StrCat(ObjectKey(object), ": ", error.message()));
  }
  static std::string Describe(const v1::ObjectEvent& e) {
    const char* type = e.type() == v1::ObjectEvent::UPSERT ? "UPSERT " : "DELETE ";
    if (e.has_pod_group()) {
      return absl::StrCat(type, "group ", e.pod_group().meta().namespace_(), "/", e.pod_group().meta().name(),
                          " min=", e.pod_group().min_member());
    }
    if (e.has_namespace_object()) return absl::StrCat(type, "namespace ", e.namespace_object().meta().name());
    if (e.has_pdb()) return absl::StrCat(type, "pdb ", e.pdb().meta().namespace_(), "/", e.pdb().meta().name());
    return absl::StrCat(type, e.pod().meta().namespace_(), "/", e.pod().meta().name(), "@",
                        e.pod().meta().resource_version());
  }
  int initial_lists() const { return static_cast<int>(parts_done.size()); }
  const FakeTransport* transport_;
  std::function<void()> on_events;  // Runs after each OnEvents (a watch event's time passing).
  std::vector<size_t> parts_done;
  std::vector<std::string> initial, changes, bad, pages;
};

// Pods listed in one part (most tests script a single list).
ResourceKind OnePartPods() {
  ResourceKind kind = PodsKind();
  kind.first_list_parts = {ListPart{}};
  return kind;
}

class ReflectorTest : public ::testing::Test {
 protected:
  Reflector Make(ResourceKind kind = OnePartPods()) {
    return Reflector(std::move(kind), transport_, sink_, {.page_size = 2}, [this] { return now_; },
                     [this](absl::Duration d) {
                       slept_.push_back(d);
                       if (slept_.size() >= stop_after_sleeps_) stop_ = true;
                     }, [] { return 0.0; });
  }
  ApiAnswer Ok(std::string body) { return {.status = 200, .body = std::move(body)}; }

  FakeTransport transport_;
  RecordingSink sink_{&transport_};
  absl::Time now_ = absl::FromUnixSeconds(1000);
  std::vector<absl::Duration> slept_;
  size_t stop_after_sleeps_ = 1000;
  std::atomic<bool> stop_{false};
};

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST_F(ReflectorTest, ListsInPagesAndRemembersTheResourceVersion) {
  transport_.answers = {Ok(List({Pod("a", "u-a", "1"), Pod("b", "u-b", "2")}, "10", "tok/en")),
                        Ok(List({Pod("c", "u-c", "3")}, "10"))};
  Reflector r = Make();
  ASSERT_TRUE(r.ListAndSync().ok());
  EXPECT_EQ(r.resource_version(), "10");
  EXPECT_EQ(sink_.initial_lists(), 1);
  EXPECT_THAT(sink_.initial, ElementsAre("UPSERT default/a@1", "UPSERT default/b@2", "UPSERT default/c@3"));
  // Each page reached the sink before the next one was asked for.
  EXPECT_THAT(sink_.pages, ElementsAre("1: UPSERT default/a@1 UPSERT default/b@2", "2: UPSERT default/c@3", "part 0 done"));
  ASSERT_EQ(transport_.requests.size(), 2u);
  EXPECT_EQ(transport_.requests[0].target, "/api/v1/pods?limit=2");
  EXPECT_EQ(transport_.requests[1].target, "/api/v1/pods?limit=2&continue=tok%2Fen");
}

TEST_F(ReflectorTest, RelistSendsOnlyTheDifferences) {
  transport_.answers = {Ok(List({Pod("a", "u-a", "1"), Pod("b", "u-b", "2")}, "10", "x")),
                        Ok(List({Pod("c", "u-c", "3"), Pod("e", "u-e", "4")}, "10")),
                        // a unchanged, b changed, c gone, d new, e deleted and created again.
                        Ok(List({Pod("a", "u-a", "1"), Pod("b", "u-b", "12")}, "20", "y")),
                        Ok(List({Pod("d", "u-d", "13"), Pod("e", "u-e2", "14")}, "20"))};
  Reflector r = Make();
  ASSERT_TRUE(r.ListAndSync().ok());
  ASSERT_TRUE(r.ListAndSync().ok());
  EXPECT_EQ(sink_.initial_lists(), 1);
  EXPECT_THAT(sink_.changes, ElementsAre("UPSERT default/b@12", "UPSERT default/d@13", "DELETE default/e@4",
                                         "UPSERT default/e@14", "DELETE default/c@3"));
  EXPECT_EQ(r.store_size(), 4u);
  EXPECT_EQ(r.resource_version(), "20");
}

TEST_F(ReflectorTest, ExpiredContinueTokenRestartsTheList) {
  // b was sent with the first page and is gone when the list restarts.
  transport_.answers = {Ok(List({Pod("a", "u-a", "1"), Pod("b", "u-b", "2")}, "10", "x")),
                        {.status = 410, .body = R"({"kind":"Status","code":410})"},
                        Ok(List({Pod("a", "u-a", "1"), Pod("c", "u-c", "3")}, "11", "y")),
                        Ok(List({Pod("d", "u-d", "4")}, "11"))};
  Reflector r = Make();
  ASSERT_TRUE(r.ListAndSync().ok());
  EXPECT_THAT(sink_.initial, ElementsAre("UPSERT default/a@1", "UPSERT default/b@2", "UPSERT default/c@3",
                                         "UPSERT default/d@4"));
  EXPECT_THAT(sink_.changes, ElementsAre("DELETE default/b@2"));
  EXPECT_EQ(r.store_size(), 3u);
  EXPECT_EQ(sink_.initial_lists(), 1);
}

TEST_F(ReflectorTest, PodsAreListedAssignedFirstThenPendingAndWatchedFromTheFirstVersion) {
  std::string bound = absl::StrCat(R"({"metadata":{"name":"on-n1","namespace":"default","uid":"u-n","resourceVersion":"5"},)",
                                   R"("spec":{"nodeName":"n1","containers":[]},"status":{"phase":"Running"}})");
  transport_.answers = {Ok(List({bound}, "10")),
                        Ok(List({Pod("p", "u-p", "11"), Pod("q", "u-q", "12")}, "13", "next")),
                        Ok(List({Pod("r", "u-r", "9")}, "13"))};
  // The watch from 10 repeats what the pending list already had (dropped)
  // and brings what changed after it.
  transport_.watches = {{.lines = {Event("ADDED", Pod("p", "u-p", "11")), Event("MODIFIED", Pod("q", "u-q", "12")),
                                   Event("MODIFIED", Pod("q", "u-q", "14"))}}};
  Reflector r = Make(PodsKind());
  ASSERT_TRUE(r.ListAndSync().ok());
  ASSERT_EQ(transport_.requests.size(), 3u);
  EXPECT_EQ(transport_.requests[0].target, "/api/v1/pods?limit=2&fieldSelector=spec.nodeName%21%3D");
  EXPECT_EQ(transport_.requests[1].target, "/api/v1/pods?limit=2&fieldSelector=spec.nodeName%3D");
  EXPECT_EQ(transport_.requests[2].target, "/api/v1/pods?limit=2&fieldSelector=spec.nodeName%3D&continue=next");
  EXPECT_THAT(sink_.pages, ElementsAre("1: UPSERT default/on-n1@5", "part 0 done",
                                       "2: UPSERT default/p@11 UPSERT default/q@12", "3: UPSERT default/r@9",
                                       "part 1 done"));
  EXPECT_TRUE(r.synced());
  EXPECT_EQ(r.resource_version(), "10");
  absl::Status error;
  EXPECT_EQ(r.Watch(&error), Reflector::WatchEnd::kEnded) << error;
  EXPECT_THAT(transport_.requests.back().target, HasSubstr("resourceVersion=10&"));
  EXPECT_THAT(sink_.changes, ElementsAre("UPSERT default/q@14"));
}

TEST_F(ReflectorTest, AFailedFirstListResumesAtThePartThatFailed) {
  transport_.answers = {Ok(List({}, "10")), {.status = 500, .body = R"({"message":"etcd is sad"})"},
                        Ok(List({Pod("p", "u-p", "11")}, "12"))};
  Reflector r = Make(PodsKind());
  EXPECT_FALSE(r.ListAndSync().ok());
  EXPECT_FALSE(r.synced());
  ASSERT_TRUE(r.ListAndSync().ok());
  ASSERT_EQ(transport_.requests.size(), 3u);
  EXPECT_THAT(transport_.requests[2].target, HasSubstr("fieldSelector=spec.nodeName%3D"));
  EXPECT_THAT(sink_.parts_done, ElementsAre(0u, 1u));
  EXPECT_EQ(r.resource_version(), "10");
  // A relist is one unfiltered list.
  transport_.answers = {Ok(List({}, "20"))};
  ASSERT_TRUE(r.ListAndSync().ok());
  EXPECT_EQ(transport_.requests.back().target, "/api/v1/pods?limit=2");
  EXPECT_THAT(sink_.changes, ElementsAre("DELETE default/p@11"));
}

TEST_F(ReflectorTest, FinishedPodsAreDeletesAndNeverSentWhenFirstSeenFinished) {
  transport_.answers = {Ok(List({Pod("done", "u-1", "1", "Succeeded"), Pod("run", "u-2", "2", "Running")}, "10"))};
  transport_.watches = {{.lines = {Event("MODIFIED", Pod("run", "u-2", "11", "Failed")),
                                   Event("DELETED", Pod("run", "u-2", "12", "Failed")),
                                   Event("DELETED", Pod("done", "u-1", "13", "Succeeded"))}}};
  Reflector r = Make();
  ASSERT_TRUE(r.ListAndSync().ok());
  EXPECT_THAT(sink_.initial, ElementsAre("UPSERT default/run@2"));
  absl::Status error;
  EXPECT_EQ(r.Watch(&error), Reflector::WatchEnd::kEnded) << error;
  EXPECT_THAT(sink_.changes, ElementsAre("DELETE default/run@11"));
  EXPECT_EQ(r.store_size(), 0u);
}

TEST_F(ReflectorTest, WatchAppliesEventsAndBookmarksMoveTheResourceVersion) {
  transport_.answers = {Ok(List({Pod("a", "u-a", "1")}, "10"))};
  transport_.watches = {{.lines = {Event("ADDED", Pod("b", "u-b", "11")), Event("MODIFIED", Pod("a", "u-a", "12")),
                                   Event("DELETED", Pod("b", "u-b", "13")),
                                   R"({"type":"BOOKMARK","object":{"kind":"Pod","metadata":{"resourceVersion":"20"}}})"}}};
  Reflector r = Make();
  ASSERT_TRUE(r.ListAndSync().ok());
  absl::Status error;
  EXPECT_EQ(r.Watch(&error), Reflector::WatchEnd::kEnded);
  EXPECT_THAT(transport_.requests.back().target,
              HasSubstr("/api/v1/pods?watch=1&allowWatchBookmarks=true&resourceVersion=10&timeoutSeconds="));
  EXPECT_THAT(sink_.changes, ElementsAre("UPSERT default/b@11", "UPSERT default/a@12", "DELETE default/b@13"));
  EXPECT_EQ(r.resource_version(), "20");
}

TEST_F(ReflectorTest, GoneAsStatusOrAsErrorEventMeansRelist) {
  transport_.answers = {Ok(List({}, "10"))};
  transport_.watches = {{.head = {.status = 410, .body = "{}"}},
                        {.lines = {R"({"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired"}})"}}};
  Reflector r = Make();
  ASSERT_TRUE(r.ListAndSync().ok());
  absl::Status error;
  EXPECT_EQ(r.Watch(&error), Reflector::WatchEnd::kGone);
  EXPECT_EQ(r.Watch(&error), Reflector::WatchEnd::kGone);
}

TEST_F(ReflectorTest, AWatchThatClosesAtOnceWithNoEventsIsAnError) {
  transport_.answers = {Ok(List({}, "10"))};
  transport_.watches = {{.lines = {}}, {.lines = {}, .end = absl::UnavailableError("connection reset")}};
  Reflector r = Make();
  ASSERT_TRUE(r.ListAndSync().ok());
  absl::Status error;
  EXPECT_EQ(r.Watch(&error), Reflector::WatchEnd::kError);
  EXPECT_THAT(error.message(), HasSubstr("very short watch"));
  EXPECT_EQ(r.Watch(&error), Reflector::WatchEnd::kError);
  EXPECT_THAT(error.message(), HasSubstr("connection reset"));
}

TEST_F(ReflectorTest, AnUntranslatableObjectIsReportedAndSkipped) {
  transport_.answers = {Ok(List({Pod("bad", "u-1", "1", "Pending", "lots"), Pod("good", "u-2", "2")}, "10"))};
  Reflector r = Make();
  ASSERT_TRUE(r.ListAndSync().ok());
  EXPECT_THAT(sink_.initial, ElementsAre("UPSERT default/good@2"));
  ASSERT_EQ(sink_.bad.size(), 1u);
  EXPECT_THAT(sink_.bad[0], HasSubstr("default/bad: spec.containers[0].resources.requests.cpu"));
}

TEST_F(ReflectorTest, APodWithAWorkloadReplicaKeyIsRefusedAndTheRestOfTheListArrives) {
  // podGroupReplicaKey (one gang per replica) is not supported: the pod is
  // reported with its field, not silently merged into one gang with the others.
  const std::string replica = R"({"metadata":{"name":"w-0","namespace":"default","uid":"u-1","resourceVersion":"1"},)"
                              R"("spec":{"workloadRef":{"name":"job","podGroup":"workers","podGroupReplicaKey":"0"},)"
                              R"("containers":[{"name":"c"}]},"status":{"phase":"Pending"}})";
  transport_.answers = {Ok(List({replica, Pod("good", "u-2", "2")}, "10"))};
  Reflector r = Make();
  ASSERT_TRUE(r.ListAndSync().ok());
  EXPECT_THAT(sink_.initial, ElementsAre("UPSERT default/good@2"));
  ASSERT_EQ(sink_.bad.size(), 1u);
  EXPECT_THAT(sink_.bad[0], HasSubstr("default/w-0: spec.workloadRef.podGroupReplicaKey: not supported"));
}

TEST_F(ReflectorTest, RunRelistsAfterGoneAndBacksOffOnErrors) {
  transport_.answers = {Ok(List({Pod("a", "u-a", "1")}, "10")),  // First list.
                        Ok(List({Pod("b", "u-b", "30")}, "30"))};  // Relist after 410.
  transport_.watches = {{.head = {.status = 500, .body = R"({"message":"etcd is sad"})"}},
                        {.lines = {Event("ADDED", Pod("c", "u-c", "11"))}, .end = absl::UnavailableError("dropped")},
                        {.head = {.status = 410}}};
  // The relist after 410 waits the third backoff; after it the fake has no
  // more watches: the fourth backoff stops the run.
  stop_after_sleeps_ = 4;
  Reflector r = Make();
  r.Run(stop_);
  EXPECT_EQ(r.resource_version(), "30");
  EXPECT_THAT(sink_.initial, ElementsAre("UPSERT default/a@1"));
  EXPECT_THAT(sink_.changes, ElementsAre("UPSERT default/c@11", "UPSERT default/b@30", "DELETE default/a@1",
                                         "DELETE default/c@11"));
  EXPECT_THAT(slept_, ElementsAre(absl::Milliseconds(800), absl::Milliseconds(1600), absl::Milliseconds(3200),
                                  absl::Milliseconds(6400)));
}

std::string Workload(const std::string& name, const std::string& uid, const std::string& rv,
                     const std::vector<std::pair<std::string, int>>& groups) {
  std::vector<std::string> gs;
  for (const auto& [g, min] : groups) {
    gs.push_back(absl::StrCat(R"({"name":")", g, R"(","policy":{"gang":{"minCount":)", min, "}}}"));
  }
  return absl::StrCat(R"({"apiVersion":"scheduling.k8s.io/v1alpha1","kind":"Workload","metadata":{"name":")", name,
                      R"(","namespace":"default","uid":")", uid, R"(","resourceVersion":")", rv,
                      R"("},"spec":{"podGroups":[)", absl::StrJoin(gs, ","), "]}}");
}

TEST_F(ReflectorTest, AWorkloadIsOnePodGroupPerEntryAndItsGroupsComeAndGoWithIt) {
  transport_.answers = {Ok(List({Workload("train", "u-w", "1", {{"workers", 4}, {"ps", 2}})}, "10", "", "WorkloadList")),
                        // Relist: the ps group dropped, an eval group added.
                        Ok(List({Workload("train", "u-w", "20", {{"workers", 8}, {"eval", 1}})}, "20", "", "WorkloadList")),
                        // Relist: the Workload is gone.
                        Ok(List({}, "30", "", "WorkloadList"))};
  Reflector r = Make(WorkloadsKind());
  EXPECT_EQ(WorkloadsKind().list_path, "/apis/scheduling.k8s.io/v1alpha1/workloads");
  ASSERT_TRUE(r.ListAndSync().ok());
  EXPECT_THAT(sink_.initial, ElementsAre("UPSERT group default/train/workers min=4", "UPSERT group default/train/ps min=2"));
  transport_.watches = {{.lines = {Event("MODIFIED", Workload("train", "u-w", "15", {{"workers", 8}, {"ps", 2}}))}}};
  absl::Status error;
  EXPECT_EQ(r.Watch(&error), Reflector::WatchEnd::kEnded) << error;
  ASSERT_TRUE(r.ListAndSync().ok());
  ASSERT_TRUE(r.ListAndSync().ok());
  EXPECT_THAT(sink_.changes, ElementsAre("UPSERT group default/train/workers min=8", "UPSERT group default/train/ps min=2",
                                         // Relist: ps dropped.
                                         "DELETE group default/train/ps min=2", "UPSERT group default/train/workers min=8",
                                         "UPSERT group default/train/eval min=1",
                                         // Relist: gone.
                                         "DELETE group default/train/workers min=8",
                                         "DELETE group default/train/eval min=1"));
  EXPECT_EQ(r.store_size(), 0u);
}

TEST_F(ReflectorTest, AWatchedWorkloadDeletionDeletesEachGroup) {
  transport_.answers = {Ok(List({Workload("train", "u-w", "1", {{"a", 2}, {"b", 3}})}, "10", "", "WorkloadList"))};
  transport_.watches = {{.lines = {Event("DELETED", Workload("train", "u-w", "11", {{"a", 2}, {"b", 3}}))}}};
  Reflector r = Make(WorkloadsKind());
  ASSERT_TRUE(r.ListAndSync().ok());
  absl::Status error;
  EXPECT_EQ(r.Watch(&error), Reflector::WatchEnd::kEnded) << error;
  EXPECT_THAT(sink_.changes, ElementsAre("DELETE group default/train/a min=2", "DELETE group default/train/b min=3"));
}

TEST_F(ReflectorTest, RelistDeletesVanishedObjectsOfEveryKind) {
  struct Case {
    ResourceKind kind;
    std::string keep, gone, want;
  };
  const std::vector<Case> cases = {
      {NamespacesKind(), R"({"metadata":{"name":"keep","uid":"u1","resourceVersion":"1"}})",
       R"({"metadata":{"name":"gone","uid":"u2","resourceVersion":"2"}})", "DELETE namespace gone"},
      {PodDisruptionBudgetsKind(),
       R"({"metadata":{"name":"keep","namespace":"default","uid":"u1","resourceVersion":"1"},"spec":{"minAvailable":1}})",
       R"({"metadata":{"name":"gone","namespace":"default","uid":"u2","resourceVersion":"2"},"spec":{"minAvailable":1}})",
       "DELETE pdb default/gone"},
      {SchedulerPluginsPodGroupsKind(),
       R"({"apiVersion":"scheduling.x-k8s.io/v1alpha1","metadata":{"name":"keep","namespace":"default","uid":"u1","resourceVersion":"1"},"spec":{"minMember":2}})",
       R"({"apiVersion":"scheduling.x-k8s.io/v1alpha1","metadata":{"name":"gone","namespace":"default","uid":"u2","resourceVersion":"2"},"spec":{"minMember":3}})",
       "DELETE group default/gone min=3"},
      {KubernetesPodGroupsKind(),
       R"({"apiVersion":"scheduling.k8s.io/v1alpha2","metadata":{"name":"keep","namespace":"default","uid":"u1","resourceVersion":"1"},"spec":{"schedulingPolicy":{"gang":{"minCount":2}}}})",
       R"({"apiVersion":"scheduling.k8s.io/v1alpha2","metadata":{"name":"gone","namespace":"default","uid":"u2","resourceVersion":"2"},"spec":{"schedulingPolicy":{"gang":{"minCount":3}}}})",
       "DELETE group default/gone min=3"},
  };
  for (const Case& c : cases) {
    RecordingSink sink;
    FakeTransport transport;
    transport.answers = {Ok(List({c.keep, c.gone}, "10", "", c.kind.list_kind)),
                         Ok(List({c.keep}, "20", "", c.kind.list_kind))};
    Reflector r(c.kind, transport, sink, {}, [this] { return now_; }, [](absl::Duration) {}, [] { return 0.0; });
    ASSERT_TRUE(r.ListAndSync().ok()) << c.kind.kind;
    EXPECT_EQ(sink.initial.size(), 2u) << c.kind.kind << ": " << absl::StrJoin(sink.bad, "; ");
    ASSERT_TRUE(r.ListAndSync().ok()) << c.kind.kind;
    EXPECT_THAT(sink.changes, ElementsAre(c.want)) << c.kind.kind;
    EXPECT_EQ(r.store_size(), 1u);
  }
}

TEST_F(ReflectorTest, AbsentOrForbiddenOptionalResourceIsAnEmptyInitialList) {
  for (int status : {404, 403}) {
    RecordingSink sink;
    FakeTransport transport;
    transport.answers = {{.status = status, .body = R"({"kind":"Status"})"}};
    Reflector r(SchedulerPluginsPodGroupsKind(), transport, sink, {}, [this] { return now_; }, [](absl::Duration) {},
                [] { return 0.0; });
    r.Run(stop_);  // Returns: nothing to watch.
    EXPECT_EQ(sink.initial_lists(), 1) << status;  // The only part is done.
    EXPECT_TRUE(sink.initial.empty());
    EXPECT_EQ(transport.requests.size(), 1u);
  }
}

TEST_F(ReflectorTest, ARequiredKindRetriesARefusedFirstListAndIsNotSyncedMeanwhile) {
  for (int status : {403, 404}) {
    SCOPED_TRACE(status);
    RecordingSink sink;
    FakeTransport transport;
    transport.answers = {{.status = status, .body = R"({"kind":"Status","message":"pods is forbidden"})"},
                         Ok(List({Pod("a", "u-a", "1")}, "10"))};
    std::vector<absl::Duration> slept;
    std::atomic<bool> stop{false};
    Reflector r(OnePartPods(), transport, sink, {}, [this] { return now_; },
                [&](absl::Duration d) {
                  slept.push_back(d);
                  // No ListEnd for the scheduler while the list is refused.
                  if (slept.size() == 1) EXPECT_TRUE(sink.parts_done.empty());
                  if (slept.size() == 2) stop = true;  // The watch the fake has not scripted.
                },
                [] { return 0.0; });
    r.Run(stop);
    EXPECT_THAT(sink.parts_done, ElementsAre(0u));
    EXPECT_THAT(sink.initial, ElementsAre("UPSERT default/a@1"));
    ASSERT_FALSE(slept.empty());
    EXPECT_EQ(slept.front(), absl::Milliseconds(800));
    ASSERT_EQ(transport.requests.size(), 3u);  // List (refused), list, watch.
    EXPECT_THAT(transport.requests[2].target, HasSubstr("watch=1"));
  }
}

TEST_F(ReflectorTest, AnOptionalKindGivesUpOnlyOnItsFirstList) {
  const ResourceKind kind = PriorityClassesKind();
  ASSERT_TRUE(kind.optional);
  transport_.answers = {Ok(List({}, "10", "", kind.list_kind)),
                        {.status = 403, .body = R"({"kind":"Status"})"},  // The relist after 410.
                        Ok(List({}, "20", "", kind.list_kind))};
  transport_.watches = {{.head = {.status = 410}}};
  stop_after_sleeps_ = 3;  // 410, the refused relist, then the watch the fake has not scripted.
  Reflector r = Make(kind);
  r.Run(stop_);
  EXPECT_EQ(r.resource_version(), "20");
  ASSERT_EQ(transport_.requests.size(), 5u);  // List, watch, list (refused), list, watch.
  EXPECT_THAT(transport_.requests[4].target, HasSubstr("watch=1&allowWatchBookmarks=true&resourceVersion=20"));
}

TEST_F(ReflectorTest, AFailedFirstListDeletesWhatItSentThatTheRetryDidNotList) {
  // Part 0 (assigned pods) completes; part 1's first attempt sends p and q,
  // then fails; p is deleted before the retry, which lists only q.
  transport_.answers = {Ok(List({Pod("x", "u-x", "5")}, "10")),
                        Ok(List({Pod("p", "u-p", "6"), Pod("q", "u-q", "7")}, "11", "next")),
                        {.status = 500, .body = R"({"message":"etcd is sad"})"},
                        Ok(List({Pod("q", "u-q", "7")}, "12"))};
  Reflector r = Make(PodsKind());
  EXPECT_FALSE(r.ListAndSync().ok());
  ASSERT_TRUE(r.ListAndSync().ok());
  EXPECT_THAT(sink_.initial, ElementsAre("UPSERT default/x@5", "UPSERT default/p@6", "UPSERT default/q@7"));
  // p is deleted before part 1 is done; part 0's x stays.
  EXPECT_THAT(sink_.changes, ElementsAre("DELETE default/p@6"));
  EXPECT_THAT(sink_.pages.back(), "part 1 done");
  EXPECT_EQ(r.store_size(), 2u);
  // The same for a one-part list whose first page came from a failed attempt.
  RecordingSink sink;
  FakeTransport transport;
  transport.answers = {Ok(List({Pod("a", "u-a", "1"), Pod("b", "u-b", "2")}, "10", "next")),
                       {.status = 500, .body = R"({"message":"etcd is sad"})"},
                       Ok(List({Pod("b", "u-b", "2")}, "11"))};
  Reflector one(OnePartPods(), transport, sink, {.page_size = 2}, [this] { return now_; }, [](absl::Duration) {},
                [] { return 0.0; });
  EXPECT_FALSE(one.ListAndSync().ok());
  ASSERT_TRUE(one.ListAndSync().ok());
  EXPECT_THAT(sink.changes, ElementsAre("DELETE default/a@1"));
  EXPECT_EQ(one.store_size(), 1u);
}

TEST_F(ReflectorTest, AMalformedListAnswerIsAnErrorAndDeletesNothing) {
  transport_.answers = {Ok(List({Pod("a", "u-a", "1"), Pod("b", "u-b", "2")}, "10"))};
  Reflector r = Make();
  ASSERT_TRUE(r.ListAndSync().ok());
  for (const std::string body :
       {R"({"kind":"PodList","metadata":{"resourceVersion":"20"},"items":{"oops":1}})",
        R"({"kind":"PodList","metadata":{"resourceVersion":"20"},"items":"nope"})",
        R"({"kind":"PodList","metadata":{"resourceVersion":"20"}})", R"([])", R"("PodList")",
        R"({"kind":"NodeList","metadata":{"resourceVersion":"20"},"items":[]})"}) {
    transport_.answers = {Ok(body)};
    absl::Status s = r.ListAndSync();  // A relist.
    EXPECT_TRUE(absl::IsDataLoss(s)) << body << ": " << s;
    EXPECT_THAT(s.message(), HasSubstr("list /api/v1/pods")) << body;
  }
  EXPECT_THAT(sink_.changes, ElementsAre());
  EXPECT_EQ(r.store_size(), 2u);
  EXPECT_EQ(r.resource_version(), "10");
  // Go's encoding of an empty list (null items) is an empty list.
  transport_.answers = {Ok(R"({"kind":"PodList","metadata":{"resourceVersion":"30"},"items":null})")};
  ASSERT_TRUE(r.ListAndSync().ok());
  EXPECT_THAT(sink_.changes, ElementsAre("DELETE default/a@1", "DELETE default/b@2"));
}

TEST_F(ReflectorTest, AMalformedListIsRetriedWithBackoff) {
  transport_.answers = {Ok(R"({"kind":"PodList","metadata":{"resourceVersion":"10"},"items":"nope"})"),
                        Ok(List({Pod("a", "u-a", "1")}, "10"))};
  stop_after_sleeps_ = 2;  // The malformed list, then the watch the fake has not scripted.
  Reflector r = Make();
  r.Run(stop_);
  EXPECT_THAT(sink_.initial, ElementsAre("UPSERT default/a@1"));
  ASSERT_FALSE(slept_.empty());
  EXPECT_EQ(slept_.front(), absl::Milliseconds(800));
}

TEST_F(ReflectorTest, RelistsWaitTheBackoffWhichStartsAgainAfterTwoHealthyMinutes) {
  transport_.answers = {Ok(List({}, "10")), Ok(List({}, "20")), Ok(List({}, "30")), Ok(List({}, "40"))};
  transport_.watches = {{.head = {.status = 410}},
                        {.lines = {R"({"type":"ERROR","object":{"kind":"Status","code":410}})"}},
                        // Three healthy minutes pass while this watch delivers its event.
                        {.lines = {Event("ADDED", Pod("c", "u-c", "31")),
                                   R"({"type":"ERROR","object":{"kind":"Status","code":410}})"}}};
  sink_.on_events = [this, once = true]() mutable {
    if (once) now_ += absl::Minutes(3);
    once = false;
  };
  stop_after_sleeps_ = 4;  // Three relists, then the watch the fake has not scripted.
  Reflector r = Make();
  r.Run(stop_);
  EXPECT_EQ(r.resource_version(), "40");
  EXPECT_THAT(slept_, ElementsAre(absl::Milliseconds(800), absl::Milliseconds(1600), absl::Milliseconds(800),
                                  absl::Milliseconds(1600)));
}

TEST_F(ReflectorTest, AnUnknownWatchEventIsSkippedAndAnUndecodableOrErrorOneMeansRelist) {
  transport_.answers = {Ok(List({}, "10"))};
  const std::string deep = absl::StrCat(
      R"({"type":"ADDED","object":{"metadata":{"name":"deep","namespace":"default","uid":"u","resourceVersion":"7"},"spec":{"x":)",
      std::string(300, '['), std::string(300, ']'), "}}}");
  transport_.watches = {
      {.lines = {R"({"type":"WEIRD","object":{"metadata":{"name":"x","resourceVersion":"11"}}})",
                 Event("ADDED", Pod("b", "u-b", "12"))}},
      {.lines = {R"({"type":"ADDED","object":{"metadata":{"name":"x")"}},
      {.lines = {deep}},
      {.lines = {R"({"type":"ERROR","object":{"kind":"Status","code":500,"message":"etcd hiccup"}})"}},
      {.lines = {R"({"type":"ERROR","object":{"kind":"Status","code":429,"message":"slow down"}})"}}};
  Reflector r = Make();
  ASSERT_TRUE(r.ListAndSync().ok());
  absl::Status error;
  EXPECT_EQ(r.Watch(&error), Reflector::WatchEnd::kEnded) << error;
  EXPECT_THAT(sink_.changes, ElementsAre("UPSERT default/b@12"));
  EXPECT_EQ(r.resource_version(), "12");
  EXPECT_EQ(r.Watch(&error), Reflector::WatchEnd::kRelist);
  EXPECT_THAT(error.message(), HasSubstr("not JSON"));
  EXPECT_EQ(r.Watch(&error), Reflector::WatchEnd::kRelist);
  EXPECT_EQ(r.resource_version(), "12");
  // An ERROR event: relist, as client-go does; but a 429 watches again.
  EXPECT_EQ(r.Watch(&error), Reflector::WatchEnd::kRelist);
  EXPECT_THAT(error.message(), HasSubstr("etcd hiccup"));
  EXPECT_EQ(r.Watch(&error), Reflector::WatchEnd::kError);
}

TEST_F(ReflectorTest, RunRelistsAfterAnUndecodableWatchEvent) {
  transport_.answers = {Ok(List({Pod("a", "u-a", "1")}, "10")), Ok(List({Pod("b", "u-b", "20")}, "20"))};
  transport_.watches = {{.lines = {R"({"type":"ADDED","object":{"metadata":{"name":"x")"}}};
  stop_after_sleeps_ = 2;  // The relist's backoff, then the watch the fake has not scripted.
  Reflector r = Make();
  r.Run(stop_);
  ASSERT_EQ(transport_.requests.size(), 4u);
  EXPECT_THAT(transport_.requests[1].target, HasSubstr("watch=1&allowWatchBookmarks=true&resourceVersion=10&"));
  EXPECT_EQ(transport_.requests[2].target, "/api/v1/pods?limit=2");  // A relist, not a watch from 10.
  EXPECT_THAT(transport_.requests[3].target, HasSubstr("resourceVersion=20&"));
  EXPECT_THAT(sink_.changes, ElementsAre("UPSERT default/b@20", "DELETE default/a@1"));
}

TEST_F(ReflectorTest, AQuietWatchIsWatchedAgainFromItsVersionAtOnce) {
  // The transport's idle timeout (a quiet watch, or a half-open connection).
  transport_.answers = {Ok(List({}, "10"))};
  transport_.watches = {{.lines = {Event("ADDED", Pod("b", "u-b", "11"))},
                         .end = absl::DeadlineExceededError("watch stream: no data for 1m")},
                        {.lines = {Event("ADDED", Pod("c", "u-c", "12"))}, .end = absl::UnavailableError("reset")}};
  stop_after_sleeps_ = 1;
  Reflector r = Make();
  r.Run(stop_);
  ASSERT_EQ(transport_.requests.size(), 3u);
  EXPECT_THAT(transport_.requests[2].target, HasSubstr("resourceVersion=11&"));
  EXPECT_THAT(sink_.changes, ElementsAre("UPSERT default/b@11", "UPSERT default/c@12"));
  EXPECT_EQ(slept_.size(), 1u);  // Only after the reset, none after the quiet end.
}

}  // namespace
}  // namespace podium::kube

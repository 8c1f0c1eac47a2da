#include "metrics/adapter_metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "prometheus/text_serializer.h"

namespace podium::kube {
namespace {

using ::testing::HasSubstr;

TEST(ResourceOfTest, NamesTheResourceAndSubresource) {
  EXPECT_EQ(ResourceOf("/api/v1/pods?limit=500&fieldSelector=spec.nodeName%3D"), "pods");
  EXPECT_EQ(ResourceOf("/api/v1/nodes"), "nodes");
  EXPECT_EQ(ResourceOf("/api/v1/nodes/n1"), "nodes");
  EXPECT_EQ(ResourceOf("/api/v1/namespaces"), "namespaces");
  EXPECT_EQ(ResourceOf("/api/v1/namespaces/kube-system"), "namespaces");
  EXPECT_EQ(ResourceOf("/api/v1/namespaces/default/pods/web-1"), "pods");
  EXPECT_EQ(ResourceOf("/api/v1/namespaces/default/pods/web-1/binding"), "pods/binding");
  EXPECT_EQ(ResourceOf("/api/v1/namespaces/default/pods/web-1/status"), "pods/status");
  EXPECT_EQ(ResourceOf("/apis/events.k8s.io/v1/namespaces/default/events"), "events");
  EXPECT_EQ(ResourceOf("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/podium"), "leases");
  EXPECT_EQ(ResourceOf("/apis/policy/v1/poddisruptionbudgets?watch=1"), "poddisruptionbudgets");
  EXPECT_EQ(ResourceOf("/healthz"), "");
}

TEST(AdapterMetricsTest, SeriesCarryClientGoNamesAndLabels) {
  auto registry = std::make_shared<prometheus::Registry>();
  AdapterMetrics m(registry);
  m.ObserveRequest("POST", "/api/v1/namespaces/default/pods/a/binding", 201, absl::Milliseconds(3));
  m.ObserveRequest("POST", "/api/v1/namespaces/default/pods/b/binding", 201, absl::Milliseconds(3));
  m.ObserveRequest("GET", "/api/v1/pods?limit=500", 0, absl::Seconds(1));
  m.ObserveRateLimiterWait("POST", absl::Milliseconds(20));
  m.CountRetry("POST", "/api/v1/namespaces/default/pods/a/binding", 429);
  m.CountWatchRestart("Pod", "gone");
  m.CountRelist("Pod");
  m.CountSkippedObject("Pod");
  m.SetActionQueueDepth("actions", 7);
  m.CountAction("bind", "OK");
  m.SetLeader("kube-system/podium", true);
  const std::string text = prometheus::TextSerializer().Serialize(registry->Collect());
  EXPECT_THAT(text, HasSubstr(R"(rest_client_requests_total{code="201",method="POST",resource="pods/binding"} 2)"));
  EXPECT_THAT(text, HasSubstr(R"(rest_client_requests_total{code="<error>",method="GET",resource="pods"} 1)"));
  EXPECT_THAT(text, HasSubstr(R"(rest_client_request_duration_seconds_count{resource="pods/binding",verb="POST"} 2)"));
  EXPECT_THAT(text, HasSubstr(R"(rest_client_rate_limiter_duration_seconds_count{verb="POST"} 1)"));
  EXPECT_THAT(text, HasSubstr(R"(rest_client_request_retries_total{code="429",resource="pods/binding",verb="POST"} 1)"));
  EXPECT_THAT(text, HasSubstr(R"(podium_adapter_watch_restarts_total{kind="Pod",reason="gone"} 1)"));
  EXPECT_THAT(text, HasSubstr(R"(podium_adapter_relists_total{kind="Pod"} 1)"));
  EXPECT_THAT(text, HasSubstr(R"(podium_adapter_objects_skipped_total{kind="Pod"} 1)"));
  EXPECT_THAT(text, HasSubstr(R"(podium_adapter_action_queue_depth{lane="actions"} 7)"));
  EXPECT_THAT(text, HasSubstr(R"(podium_adapter_actions_total{action="bind",result="OK"} 1)"));
  EXPECT_THAT(text, HasSubstr(R"(leader_election_master_status{name="kube-system/podium"} 1)"));
}

}  // namespace
}  // namespace podium::kube

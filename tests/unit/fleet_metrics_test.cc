// serve's /metrics, the workers' half (api/fleet_metrics.h): what a worker's
// heartbeat wrote becomes series labelled with its id; stale or stopped
// workers drop out; hostile figures never forge a line or a second TYPE.
#include "api/fleet_metrics.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <string>

#include "support/store_target.h"

namespace rf::api {
namespace {

class FleetMetrics : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "rf-fleet-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    auto s = store::Store::open(rf::testing::fresh_store_target(dir_ + "/store.db"));
    ASSERT_TRUE(s.ok()) << s.error().to_string();
    store_ = std::move(*s);
    store_->set_clock([this] { return now_; });
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  void beat(const std::string& id, const std::string& metrics) {
    ASSERT_TRUE(store_->register_worker(id, 1, "host").ok());
    ASSERT_TRUE(store_->heartbeat(id, std::chrono::seconds(30), metrics).ok());
  }
  static bool has(const std::string& text, const std::string& line) {
    return text.find(line + "\n") != std::string::npos;
  }
  static size_t count(const std::string& text, const std::string& what) {
    size_t n = 0;
    for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  }

  std::string dir_;
  int64_t now_ = 1'000'000;
  std::unique_ptr<store::Store> store_;
};

TEST_F(FleetMetrics, EachLiveWorkersSeriesCarryItsIdAndEachFamilyItsTypeOnce) {
  beat("w1", R"({"counters": {"ringfence_worker_calls_total{outcome=\"finished\"}": 3,
                              "ringfence_egress_decisions_total{decision=\"refused\"}": 2},
                 "gauges": {"ringfence_worker_pool_ready": 1}})");
  beat("w2", R"({"counters": {"ringfence_worker_calls_total{outcome=\"finished\"}": 5}})");
  const std::string text = fleet_metrics_text(
      *store_, now_, {{R"(ringfence_egress_decisions_total{decision="allowed"})", 7}});
  EXPECT_TRUE(has(text, "ringfence_workers_live 2")) << text;
  EXPECT_TRUE(has(text, R"(ringfence_worker_calls_total{worker="w1",outcome="finished"} 3)"))
      << text;
  EXPECT_TRUE(has(text, R"(ringfence_worker_calls_total{worker="w2",outcome="finished"} 5)"))
      << text;
  EXPECT_TRUE(has(text, R"(ringfence_worker_pool_ready{worker="w1"} 1)")) << text;
  EXPECT_TRUE(has(text, R"(ringfence_egress_decisions_total{decision="allowed"} 7)")) << text;
  EXPECT_TRUE(has(text, R"(ringfence_egress_decisions_total{worker="w1",decision="refused"} 2)"))
      << text;
  EXPECT_EQ(count(text, "# TYPE ringfence_egress_decisions_total counter\n"), 1u) << text;
  EXPECT_EQ(count(text, "# TYPE ringfence_worker_calls_total counter\n"), 1u) << text;
  EXPECT_TRUE(has(text, "# TYPE ringfence_worker_pool_ready gauge")) << text;
  EXPECT_TRUE(has(text, "ringfence_calls_queued 0")) << text;
}

TEST_F(FleetMetrics, StaleAndStoppedWorkersAreLeftOut) {
  beat("old", R"({"gauges": {"ringfence_worker_pool_ready": 1}})");
  beat("gone", R"({"gauges": {"ringfence_worker_pool_ready": 1}})");
  ASSERT_TRUE(store_->stop_worker("gone").ok());
  now_ += kWorkerMetricsFreshMs + 1;
  beat("new", R"({"gauges": {"ringfence_worker_pool_ready": 2}})");
  const std::string text = fleet_metrics_text(*store_, now_);
  EXPECT_TRUE(has(text, "ringfence_workers_live 1")) << text;
  EXPECT_TRUE(has(text, R"(ringfence_worker_pool_ready{worker="new"} 2)")) << text;
  EXPECT_EQ(text.find("old"), std::string::npos) << text;
  EXPECT_EQ(text.find("gone"), std::string::npos) << text;
}

TEST_F(FleetMetrics, HostileFiguresForgeNoLine) {
  beat("w\"1\n", R"({"counters": {"x_total\nforged_total 99": 1, "y_total": "not a number",
                                  "z_total": 4}, "gauges": []})");
  beat("w2", "not json");
  const std::string text = fleet_metrics_text(*store_, now_);
  EXPECT_EQ(text.find("forged_total"), std::string::npos) << text;
  EXPECT_EQ(text.find("y_total"), std::string::npos) << text;
  EXPECT_TRUE(has(text, R"(z_total{worker="w\"1\n"} 4)")) << text;
  EXPECT_TRUE(has(text, "ringfence_workers_live 2")) << text;
}

}  // namespace
}  // namespace rf::api

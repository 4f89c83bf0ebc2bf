// The HyperfleetMachines API: its model validates what the registry needs and names the
// field, no output shape has room for a key, and the operations that need no machine.
#include "hyperfleet/machines/machines_service.h"

#include <gtest/gtest.h>

namespace hf::machines {
namespace {

using nlohmann::json;

class ServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = store::OpenSqliteStore(":memory:");
    ASSERT_TRUE(s.ok());
    store_ = std::move(s).value();
    RegistryOptions options;
    options.dir = "/nonexistent/machines";
    registry_ = std::make_unique<MachineRegistry>(*store_, clock_, ids_,
                                                  model::InstanceCatalog::Embedded(), options);
    service_ = std::make_unique<MachinesService>(*registry_);
  }
  std::unique_ptr<store::Store> store_;
  SystemClock clock_;
  SequentialIdSource ids_;
  std::unique_ptr<MachineRegistry> registry_;
  std::unique_ptr<MachinesService> service_;
};

TEST_F(ServiceTest, ModelNamesTheField) {
  const auto& m = service_->model();
  for (const char* op : {"RegisterMachine", "UpdateMachine", "DescribeMachine", "ListMachines",
                         "DeregisterMachine", "DrainMachine", "UndrainMachine", "ReturnMachine",
                         "PutSpareTarget", "ListSpareTargets"}) {
    EXPECT_TRUE(m.hasOperation(op)) << op;
  }
  const json ok = {{"Address", "10.0.0.5"}, {"SshPrivateKey", "k"}, {"HostPublicKey", "h"},
                   {"InstanceType", "ml.c5.large"}};
  EXPECT_TRUE(m.validateInput("RegisterMachine", ok).ok());
  struct Case {
    json input;
    std::string_view field;
  } cases[] = {
      {json{{"SshPrivateKey", "k"}, {"HostPublicKey", "h"}, {"InstanceType", "t"}}, "Address"},
      {[&] { auto j = ok; j["Port"] = 0; return j; }(), "Port"},
      {[&] { auto j = ok; j["Port"] = 70000; return j; }(), "Port"},
      {[&] { auto j = ok; j["OverrideChecks"] = "yes"; return j; }(), "OverrideChecks"},
  };
  for (const auto& c : cases) {
    auto s = m.validateInput("RegisterMachine", c.input);
    ASSERT_FALSE(s.ok()) << c.input.dump();
    // AWS names the member in lowerCamelCase ("Value '0' at 'port' failed to satisfy ...").
    std::string field(c.field);
    field[0] = static_cast<char>(field[0] - 'A' + 'a');
    EXPECT_NE(std::string(s.message()).find("'" + field + "'"), std::string::npos) << s;
  }
  EXPECT_FALSE(m.validateInput("DescribeMachine", json{{"MachineId", "m-XYZ"}}).ok());
  EXPECT_TRUE(m.validateInput("DescribeMachine", json{{"MachineId", "m-0123456789ab"}}).ok());
}

TEST_F(ServiceTest, NoOutputShapeCarriesAKey) {
  json out = {{"Machine", {{"MachineId", "m-0123456789ab"}, {"SshPrivateKey", "secret"},
                           {"IdentityFile", "/x/key"}}}};
  const json pruned = service_->model().pruneOutput("DescribeMachine", out);
  EXPECT_EQ(pruned.dump().find("secret"), std::string::npos) << pruned.dump();
  EXPECT_EQ(pruned.dump().find("/x/key"), std::string::npos) << pruned.dump();
  EXPECT_EQ(pruned["Machine"]["MachineId"], "m-0123456789ab");
}

TEST_F(ServiceTest, OperationsWithoutMachines) {
  auto missing = service_->call("DescribeMachine", json{{"MachineId", "m-0123456789ab"}});
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  auto listed = service_->call("ListMachines", json::object());
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ((*listed)["Machines"], json::array());
  ASSERT_TRUE(service_->call("PutSpareTarget", json{{"InstanceType", "ml.c5.large"}, {"Count", 2}}).ok());
  auto targets = service_->call("ListSpareTargets", json::object());
  ASSERT_TRUE(targets.ok());
  EXPECT_EQ((*targets)["SpareTargets"],
            (json::array({{{"InstanceType", "ml.c5.large"}, {"Count", 2}, {"Ready", 0},
                           {"Provisioning", 0}, {"Free", 0}, {"Total", 0}}})));
  auto bad = service_->call("PutSpareTarget", json{{"InstanceType", "ml.nope"}, {"Count", 1}});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hf::machines

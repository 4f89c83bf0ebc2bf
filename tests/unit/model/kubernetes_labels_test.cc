// The fault labels' keys (server flags) and label values made from free text
// (docs/kubernetes.md "Health on Nodes").
#include <gtest/gtest.h>
#include <gmock/gmock.h>

#include <string>

#include "hyperfleet/model/kubernetes_labels.h"

namespace hf::model {
namespace {

using ::testing::HasSubstr;

TEST(CheckLabelKeyTest, ValidKeys) {
  for (const char* key : {"sagemaker.amazonaws.com/fault-types", "fault-type", "a",
                          "example.com/Fault_Reason.v2", "a-b.c/x"}) {
    EXPECT_TRUE(CheckLabelKey(key, "--f").ok()) << key << ": " << CheckLabelKey(key, "--f");
  }
  const std::string name63(63, 'n');
  EXPECT_TRUE(CheckLabelKey("p.io/" + name63, "--f").ok());
}

TEST(CheckLabelKeyTest, InvalidKeysNameTheFlagAndTheProblem) {
  struct Case {
    std::string key;
    std::string problem;
  };
  for (const Case& c : std::vector<Case>{
           {"", "name is empty"},
           {"example.com/", "name is empty"},
           {"/fault", "prefix before '/' is empty"},
           {"a/b/c", "more than one '/'"},
           {"Example.com/x", "not a DNS subdomain"},
           {"ex_ample.com/x", "not a DNS subdomain"},
           {"example..com/x", "not a DNS subdomain"},
           {"-example.com/x", "not a DNS subdomain"},
           {std::string(254, 'a') + "/x", "longer than 253"},
           {"example.com/" + std::string(64, 'n'), "longer than 63"},
           {"fault types", "other than [A-Za-z0-9-_.]"},
           {"-fault", "begin and end"},
           {"fault.", "begin and end"},
       }) {
    const Status s = CheckLabelKey(c.key, "--kubernetes-fault-labels");
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << c.key;
    EXPECT_THAT(std::string(s.message()), HasSubstr("--kubernetes-fault-labels")) << c.key;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.problem)) << c.key;
  }
}

TEST(LabelValueOfTest, Table) {
  struct Case {
    std::string text, value;
  };
  for (const Case& c : std::vector<Case>{
           {"HardwareFault", "HardwareFault"},
           {"Health check: gpu.xid: Xid 79", "Health-check-gpu.xid-Xid-79"},
           {"The instance stopped: killed (signal 9)", "The-instance-stopped-killed-signal-9"},
           {"  --x__  ", "x"},
           {"", ""},
           {"!!! ???", ""},
           {"ünïcode ok", "n-code-ok"},
       }) {
    EXPECT_EQ(LabelValueOf(c.text), c.value) << c.text;
  }
}

TEST(LabelValueOfTest, CutTo63AndEndsWithALetterOrDigit) {
  // Character 63 is a '-' (from the space): cut there, then trimmed.
  const std::string text = std::string(62, 'a') + " bcd";
  EXPECT_EQ(LabelValueOf(text), std::string(62, 'a'));
  const std::string long_text(200, 'z');
  EXPECT_EQ(LabelValueOf(long_text), std::string(63, 'z'));
}

TEST(ParseFaultLabelKeysTest, DefaultsAreTheObservedPluralKeys) {
  const FaultLabelKeys keys;
  EXPECT_EQ(keys.type, "sagemaker.amazonaws.com/fault-types");
  EXPECT_EQ(keys.reason, "sagemaker.amazonaws.com/fault-reasons");
  EXPECT_EQ(keys.details, "sagemaker.amazonaws.com/fault-details");
  auto parsed = ParseFaultLabelKeys(
      "sagemaker.amazonaws.com/fault-types,sagemaker.amazonaws.com/fault-reasons",
      "sagemaker.amazonaws.com/fault-details");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, keys);
}

TEST(ParseFaultLabelKeysTest, TheDocumentedSingularKeys) {
  auto parsed = ParseFaultLabelKeys(
      "sagemaker.amazonaws.com/fault-type,sagemaker.amazonaws.com/fault-reason", "x.io/details");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->type, "sagemaker.amazonaws.com/fault-type");
  EXPECT_EQ(parsed->reason, "sagemaker.amazonaws.com/fault-reason");
  EXPECT_EQ(parsed->details, "x.io/details");
}

TEST(ParseFaultLabelKeysTest, BadValuesNameTheFlag) {
  struct Case {
    std::string labels, details, flag, problem;
  };
  const std::string ok = "a.io/details";
  for (const Case& c : std::vector<Case>{
           {"a.io/type", ok, "--kubernetes-fault-labels", "TYPE_KEY,REASON_KEY"},
           {"a.io/t,a.io/r,a.io/x", ok, "--kubernetes-fault-labels", "TYPE_KEY,REASON_KEY"},
           {"", ok, "--kubernetes-fault-labels", "TYPE_KEY,REASON_KEY"},
           {"a.io/t,", ok, "--kubernetes-fault-labels", "name is empty"},
           {"a.io/t,A.io/r", ok, "--kubernetes-fault-labels", "not a DNS subdomain"},
           {"a.io/t,a.io/t", ok, "--kubernetes-fault-labels", "must differ"},
           {"a.io/t,sagemaker.amazonaws.com/node-health-status", ok,
            "--kubernetes-fault-labels", "node health label"},
           {"a.io/t,a.io/r", "bad key!", "--kubernetes-fault-details-annotation",
            "other than [A-Za-z0-9-_.]"},
       }) {
    auto parsed = ParseFaultLabelKeys(c.labels, c.details);
    ASSERT_FALSE(parsed.ok()) << c.labels << " " << c.details;
    EXPECT_TRUE(absl::IsInvalidArgument(parsed.status()));
    const std::string message(parsed.status().message());
    EXPECT_THAT(message, HasSubstr(c.flag)) << c.labels;
    EXPECT_THAT(message, HasSubstr(c.problem)) << c.labels;
  }
}

}  // namespace
}  // namespace hf::model

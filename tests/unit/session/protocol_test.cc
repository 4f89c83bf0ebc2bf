// Target syntax and frame encoding of shell sessions.
#include "hyperfleet/session/protocol.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "hyperfleet/common/uri.h"

namespace hf::session {
namespace {

using ::testing::HasSubstr;

TEST(ParseTarget, AcceptsHyperPodForm) {
  auto t = ParseTarget("sagemaker-cluster:aa11bbbbb222_worker-group-1-i-111222333444555aa");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->cluster_id, "aa11bbbbb222");
  EXPECT_EQ(t->group, "worker-group-1");
  EXPECT_EQ(t->instance_id, "i-111222333444555aa");
  EXPECT_EQ(t->str(), "sagemaker-cluster:aa11bbbbb222_worker-group-1-i-111222333444555aa");
}

TEST(ParseTarget, InstanceIdIsAfterTheLastDashI) {
  auto t = ParseTarget("sagemaker-cluster:abcdefabcdef_x-i-y-i-0123abcd");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->group, "x-i-y");
  EXPECT_EQ(t->instance_id, "i-0123abcd");
}

TEST(ParseTarget, RejectsMalformedTargetsNamingTheExpectedForm) {
  const char* bad[] = {
      "",
      "i-111222333444555aa",
      "sagemaker-cluster:",
      "sagemaker-cluster:aa11bbbbb222",                          // no group/instance
      "sagemaker-cluster:my-cluster_worker-i-111222333444555aa",  // a name, not the id
      "sagemaker-cluster:AA11BBBBB222_worker-i-111222333444555aa",
      "sagemaker-cluster:aa11bbbbb222_worker",                   // no instance
      "sagemaker-cluster:aa11bbbbb222_-i-111222333444555aa",     // empty group
      "sagemaker-cluster:aa11bbbbb222_work_er-i-111222333444555aa",
      "sagemaker-cluster:aa11bbbbb222_worker-i-111222333444555",  // 15 hex
      "sagemaker-cluster:aa11bbbbb222_worker-i-111222333444555AA",
      "sagemaker-cluster:aa11bbbbb222_worker--i-111222333444555aa",  // group ends with '-'
  };
  for (const char* text : bad) {
    auto t = ParseTarget(text);
    ASSERT_FALSE(t.ok()) << text;
    EXPECT_TRUE(absl::IsInvalidArgument(t.status())) << text;
    EXPECT_EQ(AwsErrorTypeOf(t.status()), "InvalidParameterException");
    const std::string message(t.status().message());
    EXPECT_THAT(message, HasSubstr(std::string(kTargetForm))) << text;
    EXPECT_THAT(message, HasSubstr(std::string("'") + text + "'"));
  }
}

TEST(Frames, DataRoundTrip) {
  const std::string bytes("a\0b\xff", 4);
  for (FrameType type : {FrameType::kStdin, FrameType::kStdout, FrameType::kStderr,
                         FrameType::kError}) {
    const std::string wire = EncodeData(type, bytes);
    ASSERT_EQ(wire.size(), 5u);
    EXPECT_EQ(static_cast<uint8_t>(wire[0]), static_cast<uint8_t>(type));
    auto frame = DecodeFrame(wire);
    ASSERT_TRUE(frame.ok()) << frame.status();
    EXPECT_EQ(frame->type, type);
    EXPECT_EQ(frame->data, bytes);
  }
  auto eof = DecodeFrame(EncodeData(FrameType::kStdinEof, ""));
  ASSERT_TRUE(eof.ok());
  EXPECT_EQ(eof->type, FrameType::kStdinEof);
}

TEST(Frames, ResizeIsBigEndian) {
  const std::string wire = EncodeResize(0x0102, 0x0304);
  EXPECT_EQ(wire, std::string("\x04\x01\x02\x03\x04", 5));
  auto frame = DecodeFrame(wire);
  ASSERT_TRUE(frame.ok());
  EXPECT_EQ(frame->type, FrameType::kResize);
  EXPECT_EQ(frame->cols, 0x0102);
  EXPECT_EQ(frame->rows, 0x0304);
  EXPECT_EQ(DecodeFrame(EncodeResize(65535, 1))->cols, 65535);
}

TEST(Frames, ExitIsSignedBigEndian) {
  EXPECT_EQ(EncodeExit(7), std::string("\x05\x00\x00\x00\x07", 5));
  EXPECT_EQ(EncodeExit(-1), std::string("\x05\xff\xff\xff\xff", 5));
  for (int32_t status : {0, 1, 130, 255, -1, INT32_MIN, INT32_MAX}) {
    auto frame = DecodeFrame(EncodeExit(status));
    ASSERT_TRUE(frame.ok());
    EXPECT_EQ(frame->type, FrameType::kExit);
    EXPECT_EQ(frame->exit_status, status);
  }
}

TEST(Frames, RejectsMalformed) {
  EXPECT_FALSE(DecodeFrame("").ok());
  EXPECT_FALSE(DecodeFrame(std::string("\x00", 1)).ok());
  EXPECT_FALSE(DecodeFrame("\x08").ok());
  EXPECT_FALSE(DecodeFrame(std::string("\x04\x00\x50", 3)).ok());       // short resize
  EXPECT_FALSE(DecodeFrame(std::string("\x04\x00\x00\x00\x18", 5)).ok());  // zero cols
  EXPECT_FALSE(DecodeFrame(std::string("\x05\x00", 2)).ok());            // short exit
  EXPECT_FALSE(DecodeFrame("\x07x").ok());                             // eof with payload
}

TEST(Query, EncodeDecodeAndLookup) {
  const std::string target = "sagemaker-cluster:aa11bbbbb222_w-i-0123abcd";
  const std::string command = "echo 'a b'; exit 7 & ~x=%";
  EXPECT_EQ(UriEncode("a b:/~"), "a%20b%3A%2F~");
  const std::string query = "target=" + UriEncode(target) + "&command=" + UriEncode(command) +
                            "&flag&x=1+2";
  EXPECT_EQ(QueryParam(query, "target")->value(), target);
  EXPECT_EQ(QueryParam(query, "command")->value(), command);
  EXPECT_EQ(QueryParam(query, "flag")->value(), "");
  EXPECT_EQ(QueryParam(query, "x")->value(), "1 2");
  EXPECT_FALSE(QueryParam(query, "missing")->has_value());
  EXPECT_FALSE(QueryParam("a=1&a=2", "a").ok());
  EXPECT_FALSE(QueryParam("a=%4", "a").ok());
  EXPECT_FALSE(QueryParam("a=%zz", "a").ok());
  EXPECT_FALSE(QueryParam("a=1&b=%zz", "a").ok());  // a malformed query is refused whole
}

}  // namespace
}  // namespace hf::session

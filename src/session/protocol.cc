#include "hyperfleet/session/protocol.h"

#include "absl/strings/str_cat.h"
#include "hyperfleet/common/uri.h"

namespace hf::session {
namespace {

constexpr std::string_view kTargetPrefix = "sagemaker-cluster:";

bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }
bool IsAlnum(char c) { return IsLowerAlnum(c) || (c >= 'A' && c <= 'Z'); }
bool IsLowerHex(char c) { return (c >= 'a' && c <= 'f') || (c >= '0' && c <= '9'); }

Status BadTarget(std::string_view text, std::string_view why) {
  return WithAwsErrorType(
      absl::InvalidArgumentError(absl::StrCat("Invalid target '", std::string(text), "': ", std::string(why),
                                              ". Expected ", std::string(kTargetForm), ".")),
      "InvalidParameterException");
}

// ClusterInstanceGroupName: [a-zA-Z0-9](-*[a-zA-Z0-9])*, 1..63 characters.
bool ValidGroup(std::string_view g) {
  if (g.empty() || g.size() > 63 || !IsAlnum(g.front()) || !IsAlnum(g.back())) return false;
  for (char c : g) {
    if (!IsAlnum(c) && c != '-') return false;
  }
  return true;
}

// ClusterNodeId: i-[a-f0-9]{8}(?:[a-f0-9]{9})?
bool ValidInstanceId(std::string_view id) {
  if (!id.starts_with("i-")) return false;
  const std::string_view hex = id.substr(2);
  if (hex.size() != 8 && hex.size() != 17) return false;
  for (char c : hex) {
    if (!IsLowerHex(c)) return false;
  }
  return true;
}

void PutBigEndian(std::string& out, uint32_t value, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

uint32_t GetBigEndian(std::string_view in, int bytes) {
  uint32_t value = 0;
  for (int i = 0; i < bytes; ++i) value = (value << 8) | static_cast<unsigned char>(in[i]);
  return value;
}

}  // namespace

std::string SessionTarget::str() const {
  return absl::StrCat(std::string(kTargetPrefix), cluster_id, "_", group, "-", instance_id);
}

StatusOr<SessionTarget> ParseTarget(std::string_view text) {
  if (!text.starts_with(kTargetPrefix)) {
    return BadTarget(text, absl::StrCat("it does not start with '", std::string(kTargetPrefix), "'"));
  }
  const std::string_view rest = text.substr(kTargetPrefix.size());
  const auto underscore = rest.find('_');
  if (underscore == std::string_view::npos) {
    return BadTarget(text, "no '_' after the cluster id");
  }
  SessionTarget target;
  target.cluster_id = std::string(rest.substr(0, underscore));
  if (target.cluster_id.size() != 12 ||
      target.cluster_id.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789") !=
          std::string::npos) {
    return BadTarget(text, absl::StrCat("the cluster id '", target.cluster_id,
                                        "' is not 12 lowercase letters and digits (the last "
                                        "part of the cluster ARN; not the cluster name)"));
  }
  const std::string_view node = rest.substr(underscore + 1);
  const auto dash = node.rfind("-i-");
  if (dash == std::string_view::npos) {
    return BadTarget(text, "no '-i-' before the instance id");
  }
  target.group = std::string(node.substr(0, dash));
  target.instance_id = std::string(node.substr(dash + 1));
  if (!ValidGroup(target.group)) {
    return BadTarget(text, absl::StrCat("'", target.group, "' is not an instance group name"));
  }
  if (!ValidInstanceId(target.instance_id)) {
    return BadTarget(text, absl::StrCat("'", target.instance_id,
                                        "' is not an instance id (i- and 17 hex digits)"));
  }
  return target;
}

std::string EncodeData(FrameType type, std::string_view data) {
  std::string out;
  out.reserve(1 + data.size());
  out.push_back(static_cast<char>(type));
  out.append(data);
  return out;
}

std::string EncodeResize(uint16_t cols, uint16_t rows) {
  std::string out(1, static_cast<char>(FrameType::kResize));
  PutBigEndian(out, cols, 2);
  PutBigEndian(out, rows, 2);
  return out;
}

std::string EncodeExit(int32_t status) {
  std::string out(1, static_cast<char>(FrameType::kExit));
  PutBigEndian(out, static_cast<uint32_t>(status), 4);
  return out;
}

StatusOr<Frame> DecodeFrame(std::string_view message) {
  if (message.empty()) return absl::InvalidArgumentError("empty session frame");
  Frame frame;
  const auto type = static_cast<uint8_t>(message[0]);
  const std::string_view payload = message.substr(1);
  switch (type) {
    case static_cast<uint8_t>(FrameType::kStdin):
    case static_cast<uint8_t>(FrameType::kStdout):
    case static_cast<uint8_t>(FrameType::kStderr):
    case static_cast<uint8_t>(FrameType::kError):
      frame.type = static_cast<FrameType>(type);
      frame.data = std::string(payload);
      return frame;
    case static_cast<uint8_t>(FrameType::kStdinEof):
      if (!payload.empty()) return absl::InvalidArgumentError("stdin-eof frame with a payload");
      frame.type = FrameType::kStdinEof;
      return frame;
    case static_cast<uint8_t>(FrameType::kResize):
      if (payload.size() != 4) {
        return absl::InvalidArgumentError(
            absl::StrCat("resize frame with ", payload.size(), " payload bytes (expected 4)"));
      }
      frame.type = FrameType::kResize;
      frame.cols = static_cast<uint16_t>(GetBigEndian(payload, 2));
      frame.rows = static_cast<uint16_t>(GetBigEndian(payload.substr(2), 2));
      if (frame.cols == 0 || frame.rows == 0) {
        return absl::InvalidArgumentError("resize frame with a zero dimension");
      }
      return frame;
    case static_cast<uint8_t>(FrameType::kExit):
      if (payload.size() != 4) {
        return absl::InvalidArgumentError(
            absl::StrCat("exit frame with ", payload.size(), " payload bytes (expected 4)"));
      }
      frame.type = FrameType::kExit;
      frame.exit_status = static_cast<int32_t>(GetBigEndian(payload, 4));
      return frame;
    default:
      return absl::InvalidArgumentError(absl::StrCat("unknown session frame type ", type));
  }
}

StatusOr<std::optional<std::string>> QueryParam(std::string_view query, std::string_view name) {
  HF_ASSIGN_OR_RETURN(std::vector<hf::QueryParam> params, ParseQuery(query));
  std::optional<std::string> found;
  for (auto& p : params) {
    if (p.name != name) continue;
    if (found) {
      return absl::InvalidArgumentError(
          absl::StrCat("query parameter '", std::string(name), "' repeated"));
    }
    found = std::move(p.value);
  }
  return found;
}

}  // namespace hf::session

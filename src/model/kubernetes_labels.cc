#include "hyperfleet/model/kubernetes_labels.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "hyperfleet/common/strings.h"
#include "hyperfleet/model/cluster.h"

namespace hf::model {
namespace {

bool IsAlnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}
bool IsNameChar(char c) { return IsAlnum(c) || c == '-' || c == '_' || c == '.'; }

/// Why `prefix` is not a DNS subdomain; "" when it is.
std::string PrefixProblem(std::string_view prefix) {
  if (prefix.empty()) return "its prefix before '/' is empty";
  if (prefix.size() > 253) return "its prefix is longer than 253 characters";
  for (absl::string_view part : absl::StrSplit(AbslView(prefix), '.')) {
    if (part.empty() || part.size() > 63 || !IsAlnum(part.front()) || !IsAlnum(part.back())) {
      return "its prefix is not a DNS subdomain (dot-separated parts of [a-z0-9-], each "
             "beginning and ending with a letter or digit)";
    }
    for (char c : part) {
      if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) {
        return "its prefix is not a DNS subdomain (lower-case letters, digits, '-' and '.')";
      }
    }
  }
  return "";
}

/// Why `name` is not a label key's name part; "" when it is.
std::string NameProblem(std::string_view name) {
  if (name.empty()) return "its name is empty";
  if (name.size() > 63) return "its name (after the prefix) is longer than 63 characters";
  for (char c : name) {
    if (!IsNameChar(c)) return "its name has a character other than [A-Za-z0-9-_.]";
  }
  if (!IsAlnum(name.front()) || !IsAlnum(name.back())) {
    return "its name does not begin and end with a letter or digit";
  }
  return "";
}

}  // namespace

Status CheckLabelKey(std::string_view key, std::string_view flag) {
  const size_t slash = key.find('/');
  std::string problem;
  if (slash != std::string_view::npos && key.find('/', slash + 1) != std::string_view::npos) {
    problem = "it has more than one '/'";
  } else if (slash != std::string_view::npos) {
    problem = PrefixProblem(key.substr(0, slash));
    if (problem.empty()) problem = NameProblem(key.substr(slash + 1));
  } else {
    problem = NameProblem(key);
  }
  if (problem.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      AbslView(flag), ": '", AbslView(key), "' is not a valid Kubernetes label key: ", problem,
      " (e.g. sagemaker.amazonaws.com/fault-types)"));
}

std::string LabelValueOf(std::string_view text) {
  std::string out;
  bool replaced = false;  // the last character written stands for a run of others
  for (char c : text) {
    if (IsNameChar(c)) {
      out.push_back(c);
      replaced = false;
    } else if (!replaced) {
      out.push_back('-');
      replaced = true;
    }
  }
  if (out.size() > 63) out.resize(63);
  size_t begin = 0;
  while (begin < out.size() && !IsAlnum(out[begin])) ++begin;
  size_t end = out.size();
  while (end > begin && !IsAlnum(out[end - 1])) --end;
  return out.substr(begin, end - begin);
}

StatusOr<FaultLabelKeys> ParseFaultLabelKeys(std::string_view labels,
                                             std::string_view details_annotation) {
  constexpr std::string_view kLabelsFlag = "--kubernetes-fault-labels";
  constexpr std::string_view kDetailsFlag = "--kubernetes-fault-details-annotation";
  const std::vector<std::string> keys = absl::StrSplit(AbslView(labels), ',');
  if (keys.size() != 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        AbslView(kLabelsFlag), " must be TYPE_KEY,REASON_KEY (two label keys, e.g. "
        "sagemaker.amazonaws.com/fault-types,sagemaker.amazonaws.com/fault-reasons), got '",
        AbslView(labels), "'"));
  }
  FaultLabelKeys out;
  out.type = keys[0];
  out.reason = keys[1];
  out.details = std::string(details_annotation);
  HF_RETURN_IF_ERROR(CheckLabelKey(out.type, kLabelsFlag));
  HF_RETURN_IF_ERROR(CheckLabelKey(out.reason, kLabelsFlag));
  HF_RETURN_IF_ERROR(CheckLabelKey(out.details, kDetailsFlag));
  if (out.type == out.reason) {
    return absl::InvalidArgumentError(absl::StrCat(
        AbslView(kLabelsFlag), ": the type and reason keys must differ, got '", out.type, "' twice"));
  }
  for (const std::string* key : {&out.type, &out.reason}) {
    if (*key == node_health::kLabel) {
      return absl::InvalidArgumentError(absl::StrCat(
          AbslView(kLabelsFlag), ": '", *key, "' is HyperPod's node health label, not a fault label"));
    }
  }
  return out;
}

}  // namespace hf::model

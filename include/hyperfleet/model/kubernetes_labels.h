#pragma once
// HyperPod's fault labels on the Nodes of EKS-orchestrated clusters (docs/kubernetes.md
// "Health on Nodes"): their keys, which are configurable because their spelling is
// unresolved (HyperPod's docs name `fault-type`/`fault-reason`, real clusters show the plural
// keys), and what Kubernetes asks of label keys and values.
#include <string>
#include <string_view>

#include "hyperfleet/common/status.h"

namespace hf::model {

/// Where a faulty instance's fault shows on its Node. The defaults are the keys observed on
/// real HyperPod clusters (server flags --kubernetes-fault-labels and
/// --kubernetes-fault-details-annotation change them).
struct FaultLabelKeys {
  /// Label: the fault's category (a NodeFault kind, e.g. "HardwareFault").
  std::string type = "sagemaker.amazonaws.com/fault-types";
  /// Label: a more detailed reason (the health verdict's message as a label value).
  std::string reason = "sagemaker.amazonaws.com/fault-reasons";
  /// Annotation: the health verdict's message as it is (free text).
  std::string details = "sagemaker.amazonaws.com/fault-details";
  bool operator==(const FaultLabelKeys&) const = default;
};

/// OK when `key` is a valid Kubernetes label or annotation key: [PREFIX/]NAME, NAME 1-63
/// characters of [A-Za-z0-9-_.] beginning and ending with a letter or digit, PREFIX a DNS
/// subdomain (at most 253 characters; dot-separated parts of [a-z0-9-] beginning and ending
/// with a letter or digit). InvalidArgument otherwise, starting with `flag` (e.g.
/// "--kubernetes-fault-labels") and saying what is wrong.
Status CheckLabelKey(std::string_view key, std::string_view flag);

/// `text` made a valid Kubernetes label value: each run of characters other than
/// [A-Za-z0-9-_.] becomes one '-', then it is cut to 63 characters and trimmed so that it
/// begins and ends with a letter or digit. "" when nothing is left (an empty value is valid).
std::string LabelValueOf(std::string_view text);

/// The keys from the flags' values: `labels` is "TYPE_KEY,REASON_KEY" (both label keys),
/// `details_annotation` the annotation key. InvalidArgument naming the flag when a key is
/// invalid (CheckLabelKey), the labels are not two, two keys are the same, or a key is
/// HyperPod's node-health-status label.
StatusOr<FaultLabelKeys> ParseFaultLabelKeys(std::string_view labels,
                                             std::string_view details_annotation);

}  // namespace hf::model

#include "provider/ssh/fsx_plan.h"

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "hyperfleet/common/strings.h"
#include "provider/ssh/fsx_mount.h"

namespace hf::provider::ssh {

StatusOr<FsxPlan> PlanFsx(std::string_view provisioning_parameters,
                          std::string_view fsx_mount_line) {
  bool lustre = false;
  if (!StripAsciiWhitespace(provisioning_parameters).empty()) {
    const auto json = nlohmann::json::parse(provisioning_parameters, nullptr, false);
    if (!json.is_object()) {
      return absl::InvalidArgumentError("provisioning_parameters.json is not a JSON object");
    }
    int named = 0;
    for (const char* key : {"fsx_dns_name", "fsx_mountname"}) {
      auto it = json.find(key);
      if (it == json.end()) continue;
      if (!it->is_string() || it->get<std::string>().empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("provisioning_parameters.json: ", key, " must be a non-empty string"));
      }
      ++named;
    }
    if (named == 1) {
      return absl::InvalidArgumentError(
          "provisioning_parameters.json: fsx_dns_name and fsx_mountname go together");
    }
    lustre = named == 2;
  }
  if (lustre) {
    return FsxPlan{FsxSource::kLifecycleScripts,
                   "provisioning_parameters.json names fsx_dns_name and fsx_mountname: the "
                   "lifecycle scripts mount FSx at /fsx"};
  }
  const std::string_view line = StripAsciiWhitespace(fsx_mount_line);
  const std::string_view source = line.substr(0, line.find(' '));
  if (line.empty() || source == kFsxFsname) {
    return FsxPlan{FsxSource::kDefault, "the control plane shares the cluster's /fsx over sshfs"};
  }
  return FsxPlan{FsxSource::kMachine,
                 "the machine has its own /fsx (" + std::string(line) + "): kept as it is"};
}

std::string FsxMountProbeCommand(std::string_view mount_point_view) {
  const std::string mount_point(mount_point_view);
  // mountinfo: id parent maj:min root mount-point options [optional...] - fstype source ...
  return absl::StrCat(
      "awk -v m=", mount_point,
      " '$5 == m { for (i = 7; $i != \"-\"; i++) ; if (!($4 == m && $6 ~ /^ro/)) "
      "line = $(i + 2) \" \" $(i + 1) } END { if (line != \"\") print line }' "
      "/proc/self/mountinfo");
}

}  // namespace hf::provider::ssh

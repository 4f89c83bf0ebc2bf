#pragma once
// Shared by the control tests: instance groups as the API stores them.
#include <string>

#include "hyperfleet/model/cluster.h"

namespace hf::control::plan_test {

/// Group `name` of `count` ml.c5.xlarge instances with lifecycle scripts at s3://b/p/.
inline model::InstanceGroup Group(const std::string& name, int count) {
  model::InstanceGroup g;
  g.name = name;
  g.instance_type = "ml.c5.xlarge";
  g.target_count = count;
  g.spec = {{"InstanceGroupName", name}, {"InstanceType", "ml.c5.xlarge"},
            {"InstanceCount", count},
            {"LifeCycleConfig", {{"SourceS3Uri", "s3://b/p/"}, {"OnCreate", "on_create.sh"}}}};
  return g;
}

}  // namespace hf::control::plan_test

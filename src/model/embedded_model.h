#pragma once
// The service model subset embedded into the binary by cmake/embed.cmake (see
// src/model/CMakeLists.txt): the bytes of data/aws-models/sagemaker/2017-07-24/service-2.json
// and of data/aws-models/eks/2017-11-01/service-2.json.
#include <string_view>

namespace hf::data {
extern const std::string_view kSageMakerServiceModel;
extern const std::string_view kEksServiceModel;  // data/aws-models/eks/2017-11-01
}  // namespace hf::data

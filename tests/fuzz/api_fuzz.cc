// libFuzzer target for the request decoder, the model validators and the operations behind
// them: the first input byte picks an operation of the service model, the rest is the request
// body. Whatever the bytes, dispatch must return a response or an AWS error, never crash,
// leak or hang. Requests run against a real in-memory store, so accepted writes accumulate
// and later inputs exercise operations on existing clusters.
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "hyperfleet/api/api_handler.h"
#include "hyperfleet/api/cluster_operations.h"
#include "hyperfleet/api/errors.h"
#include "hyperfleet/common/clock.h"
#include "hyperfleet/common/ids.h"
#include "hyperfleet/model/service_model.h"
#include "hyperfleet/store/store.h"

namespace {

struct World {
  hf::SystemClock clock;
  hf::SequentialIdSource ids{42};
  std::unique_ptr<hf::store::Store> store;
  std::shared_ptr<const hf::model::ServiceModel> model = hf::model::ServiceModel::Embedded();
  std::unique_ptr<hf::api::ClusterOperations> clusters;
  std::unique_ptr<hf::api::ApiHandler> handler;
  std::vector<std::string> operations;

  World() {
    store = std::move(hf::store::OpenSqliteStore(":memory:").value());
    hf::api::ApiConfig config;
    clusters = std::make_unique<hf::api::ClusterOperations>(*store, *model, clock, ids, config,
                                                            [](const std::string&) {});
    handler = std::make_unique<hf::api::ApiHandler>(
        [](std::string_view) { return std::nullopt; }, clock, ids, config);
    handler->addService(*clusters);
    operations = model->operations();
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static World* world = new World();  // lives for the whole run, like a server
  if (size == 0) return 0;
  hf::http::HttpRequest req;
  req.method = "POST";
  req.target = "/";
  const auto& ops = world->operations;
  req.headers = {{"Content-Type", "application/x-amz-json-1.1"},
                 {"X-Amz-Target", "SageMaker." + ops[data[0] % ops.size()]}};
  req.body.assign(reinterpret_cast<const char*>(data + 1), size - 1);
  auto result = world->handler->dispatch(req);
  if (!result.ok()) {
    // Every rejection must map to a client error with an AWS type, never a server fault.
    auto response = hf::api::ErrorResponse(result.status(), "fuzz");
    if (response.status >= 500) {
      fprintf(stderr, "server fault for a client input: %s\n", result.status().ToString().c_str());
      abort();
    }
  }
  return 0;
}

#include <npucache/models/models.h>

#include "models/weights.h"

namespace npucache::models {

SeedExample::SeedExample() {
  linear1 = register_module("linear1", std::make_shared<nn::Linear>(2, 1));
  linear2 = register_module("linear2", std::make_shared<nn::Linear>(2, 1));
  for (auto& [name, p] : named_parameters()) {  // torch.nn.init.ones_
    std::vector<int64_t> d = p.dims();
    int64_t n = 1;
    for (int64_t x : d) n *= x;
    p.copy_from(std::vector<float>(static_cast<std::size_t>(n), 1.0f));
  }
}

Tensor SeedExample::forward(const InputMeta& x, const std::vector<Tensor>& kv) {
  return linear2->forward(x.data) + linear2->forward(kv.at(0));
}

}  // namespace npucache::models

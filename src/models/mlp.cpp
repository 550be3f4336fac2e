#include <npucache/models/models.h>

#include "models/weights.h"

namespace npucache::models {

SimpleMLP::SimpleMLP(uint64_t seed) {
  fc1 = register_module("fc1", std::make_shared<nn::Linear>(128, 256));
  fc2 = register_module("fc2", std::make_shared<nn::Linear>(256, 10));
  fc1->weight.copy_from(full_weights(seed, "fc1.weight", 256 * 128, 0.088));
  fc1->bias.copy_from(full_weights(seed, "fc1.bias", 256, 0.088));
  fc2->weight.copy_from(full_weights(seed, "fc2.weight", 10 * 256, 0.0625));
  fc2->bias.copy_from(full_weights(seed, "fc2.bias", 10, 0.0625));
}

Tensor SimpleMLP::forward(const Tensor& x) { return fc2->forward(ops::relu(fc1->forward(x))); }

}  // namespace npucache::models

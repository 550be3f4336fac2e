// Autotuning (max-autotune): for each heavy kernel of a program (matmuls,
// including attention's, and fused kernels) time candidate configurations
// on the simulated device with the example call's sizes and keep the
// fastest. Kernels of equal op and operand types are tuned once. This is
// where max-autotune's compile time goes, as in Inductor.
#pragma once

#include <npucache/compiler/config.h>
#include <npucache/ir/symbolic.h>

#include "compiler/program.h"

#include <string>
#include <vector>

namespace npucache::compiler {

struct AutotuneDecision {
  std::string key;     // "matmul f32[8, 64] f32[64, 192]"
  std::string chosen;  // "tile_m=32 tile_n=256 tile_k=128"
  double best_us = 0;
  double default_us = 0;  // the first candidate (the untuned default)
  int candidates = 0;
  std::vector<int> steps;
};

std::vector<AutotuneDecision> autotune(DeviceProgram& p, const SymBindings& example,
                                       const CompilerConfig& config, int device);
// Gives the steps of earlier decisions their chosen configuration; throws
// VerifyError when a decision names a step that is no tunable kernel.
void apply_autotune(DeviceProgram& p, const std::vector<AutotuneDecision>& decisions);

}  // namespace npucache::compiler

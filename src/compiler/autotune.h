// Autotuning (max-autotune): for each heavy kernel of a program (matmuls,
// including attention's, and fused kernels) time candidate configurations
// on the simulated device with the example call's sizes and keep the
// fastest. Kernels of equal signature (`key`) are tuned once. This is
// where max-autotune's compile time goes, as in Inductor.
//
// With config.shared_tuning, a signature is looked up in the process's
// tuning table (tuning_table.h) first: a stored decision for this device's
// runtime that compared at least as many candidates as this config asks
// for, and names one of them, is applied without timing (`from_table`);
// new decisions are added to the table. The chosen configuration is
// applied to the steps the same way either way.
//
// Scratch: each kernel is timed on zero-filled operands allocated on the
// device, at most kAutotuneScratchBytes of them (autotune_scratch.h: a
// larger matmul is timed on a slice, a larger fused kernel is not timed),
// and they are returned to the host before the next kernel, so compiling a
// model of any size adds at most that much resident memory. A decision
// says what it was timed on (`timed_on`).
#pragma once

#include <npucache/compiler/config.h>
#include <npucache/ir/symbolic.h>

#include "compiler/program.h"

#include <string>
#include <vector>

namespace npucache::compiler {

struct AutotuneDecision {
  // The signature: op, operand types, and the attributes that change the
  // kernel ("matmul f32[8, 64] f32[64, 192]", " trans_b" appended for a
  // transposed right operand; a fused kernel's code hash).
  std::string key;
  std::string chosen;  // "tile_m=32 tile_n=256 tile_k=128"
  double best_us = 0;
  double default_us = 0;  // the first candidate (the untuned default)
  int candidates = 0;
  std::vector<int> steps;
  // "" when timed at the full sizes; else the slice it was timed on ("timed
  // on N 1984 of 16032 (64 MiB autotune scratch bound)") or why it was not
  // timed ("not timed: ...").
  std::string timed_on;
  // Taken from the tuning table rather than timed by this compile (not
  // serialized: a stored decision is applied, neither tuned nor reused).
  bool from_table = false;
};

std::vector<AutotuneDecision> autotune(DeviceProgram& p, const SymBindings& example, const CompilerConfig& config,
                                       int device);
// Gives the steps of earlier decisions their chosen configuration; throws
// VerifyError when a decision names a step that is no tunable kernel.
void apply_autotune(DeviceProgram& p, const std::vector<AutotuneDecision>& decisions);

}  // namespace npucache::compiler

// Umbrella header of the npucache public API: everything a model author and
// an inference program use. Expert headers (the IR under npucache/ir/, the
// simulated runtime under npucache/runtime/, compiler settings under
// npucache/compiler/) are included by these where needed; the reference
// models are a separate library (npucache::models, <npucache/models/models.h>).
#pragma once

#include <npucache/cache.h>
#include <npucache/compile.h>
#include <npucache/coordinator.h>
#include <npucache/device.h>
#include <npucache/error.h>
#include <npucache/module.h>
#include <npucache/mpi.h>
#include <npucache/ops.h>
#include <npucache/process.h>
#include <npucache/region.h>
#include <npucache/tensor.h>
#include <npucache/trace.h>
#include <npucache/version.h>

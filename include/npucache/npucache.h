// Umbrella header of the npucache public API.
#pragma once

#include <npucache/attrs.h>
#include <npucache/cache.h>
#include <npucache/communicator.h>
#include <npucache/compile.h>
#include <npucache/compiler_config.h>
#include <npucache/decompositions.h>
#include <npucache/device.h>
#include <npucache/dist.h>
#include <npucache/dtype.h>
#include <npucache/error.h>
#include <npucache/graph.h>
#include <npucache/hash.h>
#include <npucache/launch.h>
#include <npucache/layers.h>
#include <npucache/memory.h>
#include <npucache/models.h>
#include <npucache/module.h>
#include <npucache/mpi.h>
#include <npucache/op.h>
#include <npucache/ops.h>
#include <npucache/stream.h>
#include <npucache/symbolic.h>
#include <npucache/tensor.h>
#include <npucache/trace.h>
#include <npucache/version.h>

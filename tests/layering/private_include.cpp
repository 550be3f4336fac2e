// Compiled with the compiler layer's include root: nn's private headers
// (nn/detail/) are not visible to other layers.
#include "nn/detail/trace_state.h"

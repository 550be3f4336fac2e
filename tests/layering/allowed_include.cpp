// Compiled with the compiler layer's include root: nn's interface header is
// visible to the compiler (the control case of the layering test).
#include "nn/interop.h"

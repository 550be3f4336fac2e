// Compiled with the compiler layer's include root by the layering test:
// the cache is not among the layers the compiler may use, so this include
// must not resolve.
#include "storage/store.h"

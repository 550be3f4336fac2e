// The HDF5 view of a file: the part after its envelope (envelope.h) that
// h5dump, h5ls and h5py read. Every view's root carries the same
// attributes: format "npucache", format_version (names.h) and the file's
// kind ("index", "object", "tuning", "profile", "template", "region").
#pragma once

#include "format/envelope.h"
#include "h5/h5.h"

#include <cstddef>

namespace npucache::format {

// h5::create_image(userblock) with the root attributes above. Hold
// h5::lock() while using it.
h5::Handle create_view(std::size_t userblock, EnvelopeKind kind);

}  // namespace npucache::format

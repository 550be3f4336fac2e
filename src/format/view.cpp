#include "format/view.h"

#include "format/names.h"

#include <string>

namespace npucache::format {

h5::Handle create_view(std::size_t userblock, EnvelopeKind kind) {
  h5::Handle f = h5::create_image(userblock);
  h5::write_attr(f.id(), "format", std::string(names::kFormatName));
  h5::write_attr(f.id(), "format_version", std::string(names::kFormatVersion));
  h5::write_attr(f.id(), "kind", std::string(kind_name(kind)));
  return f;
}

}  // namespace npucache::format

// The seam's shared parts (backend.h): the failure kinds' names and the
// factory choosing a backend by the URL's scheme. A new backend is its own
// file (a Backend subclass and its maker), a Scheme (config.h) with its URL
// form (config.cpp), and one case here.
#include "remote/backend.h"
#include "remote/sharded_backend.h"
#include "remote/signed_backend.h"

namespace npucache::remote {

std::string_view failure_name(Failure f) {
  switch (f) {
    case Failure::refused: return "refused";
    case Failure::timeout: return "timeout";
    case Failure::auth: return "auth";
    case Failure::full: return "full";
    case Failure::dropped: return "dropped";
    case Failure::server: return "server";
    case Failure::corrupt: return "corrupt";
    case Failure::too_large: return "too_large";
    case Failure::untrusted: return "untrusted";
  }
  return "unknown";
}

std::unique_ptr<Backend> make_unsigned_backend(const Config& config) {
  if (!config.shards.empty()) return make_sharded_backend(config);
  switch (config.scheme) {
    case Scheme::redis: return make_redis_backend(config);
    case Scheme::file: return make_file_backend(config);
  }
  return make_redis_backend(config);
}

std::unique_ptr<Backend> make_backend(const Config& config) {
  return make_signed_backend(make_unsigned_backend(config), config);
}

}  // namespace npucache::remote

#include "coord/agreed_failure.h"

#include <npucache/error.h>

#include <algorithm>

namespace npucache::coord {
namespace {

// The class of an exception, as one letter that travels between ranks.
char kind_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const ConfigError&) {
    return 'C';
  } catch (const TraceError&) {
    return 'T';
  } catch (const ShapeError&) {
    return 'S';
  } catch (const VerifyError&) {
    return 'V';
  } catch (const DeviceError&) {
    return 'D';
  } catch (const MetaTensorError&) {
    return 'M';
  } catch (const CacheError&) {
    return 'K';
  } catch (...) {
    return 'E';
  }
}

[[noreturn]] void throw_kind(char kind, const std::string& what) {
  switch (kind) {
    case 'C': throw ConfigError(what);
    case 'T': throw TraceError(what);
    case 'S': throw ShapeError(what);
    case 'V': throw VerifyError(what);
    case 'D': throw DeviceError(what);
    case 'M': throw MetaTensorError(what);
    case 'K': throw CacheError(what);
    default: throw Error(what);
  }
}

}  // namespace

LocalFailure LocalFailure::current() {
  LocalFailure f;
  f.original_ = std::current_exception();
  if (!f.original_) return f;
  f.kind_ = kind_of(f.original_);
  try {
    std::rethrow_exception(f.original_);
  } catch (const std::exception& e) {
    f.what_ = e.what();
  } catch (...) {
    f.what_ = "an exception that is not a std::exception";
  }
  return f;
}

std::string LocalFailure::encode() const { return failed() ? std::string(1, kind_) + what_ : std::string(); }

void LocalFailure::agree(const std::vector<std::string>& all, int me, const std::string& method,
                         const std::string& phase) const {
  if (std::any_of(all.begin(), all.end(), [](const std::string& s) { return !s.empty(); }))
    throw_agreed(all, me, method, phase);
}

void LocalFailure::throw_agreed(const std::vector<std::string>& all, int me, const std::string& method,
                                const std::string& phase) const {
  const auto failed_ranks =
      static_cast<std::size_t>(std::count_if(all.begin(), all.end(), [](const std::string& s) { return !s.empty(); }));
  if (failed_ranks == all.size() && failed()) std::rethrow_exception(original_);
  const auto first = std::find_if(all.begin(), all.end(), [](const std::string& s) { return !s.empty(); });
  const int rank = static_cast<int>(first - all.begin());
  const std::string& f = *first;
  std::string what =
      "cache_compile of " + method + ": rank " + std::to_string(rank) + " failed while " + phase + ": " + f.substr(1);
  if (failed_ranks > 1)
    what += " (" + std::to_string(failed_ranks) + " of " + std::to_string(all.size()) + " ranks failed)";
  if (rank != me) what += "; this rank (" + std::to_string(me) + ") stops with it";
  throw_kind(f[0], what);
}

}  // namespace npucache::coord

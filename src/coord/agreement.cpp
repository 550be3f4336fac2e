#include "coord/agreement.h"

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
  } catch (const CacheRefused&) {
    return 'R';
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
    case 'R': throw CacheRefused(what);
    case 'K': throw CacheError(what);
    default: throw Error(what);
  }
}

// One rank's failure as it travels: severity, class, phase, cause.
struct Carried {
  LocalFailure::Severity severity = LocalFailure::Severity::none;
  char kind = 'E';
  Phase phase = Phase::arrival;
  std::string cause;
};

Carried parse(const std::string& s) {
  Carried c;
  if (s.size() < 3) return c;
  c.severity = s[0] == '2' ? LocalFailure::Severity::fatal : LocalFailure::Severity::survivable;
  c.kind = s[1];
  const int p = s[2] - '0';
  c.phase = p >= 0 && p <= static_cast<int>(Phase::persist) ? static_cast<Phase>(p) : Phase::arrival;
  c.cause = s.substr(3);
  return c;
}

}  // namespace

LocalFailure LocalFailure::current(Phase phase, bool cache_errors_survivable) {
  LocalFailure f;
  f.original_ = std::current_exception();
  if (!f.original_) return f;
  f.phase_ = phase;
  f.kind_ = kind_of(f.original_);
  try {
    std::rethrow_exception(f.original_);
  } catch (const std::exception& e) {
    f.what_ = e.what();
  } catch (...) {
    f.what_ = "an exception that is not a std::exception";
  }
  if (f.what_.empty()) f.what_ = "failed";
  const bool survivable = cache_errors_survivable && (f.kind_ == 'R' || f.kind_ == 'K');
  f.severity_ = survivable ? Severity::survivable : Severity::fatal;
  return f;
}

LocalFailure LocalFailure::survivable(Phase phase, std::string cause) {
  LocalFailure f;
  f.severity_ = Severity::survivable;
  f.phase_ = phase;
  f.kind_ = 'K';
  f.what_ = std::move(cause);
  return f;
}

std::string LocalFailure::encode() const {
  if (!failed()) return {};
  return std::string(1, severity_ == Severity::fatal ? '2' : '1') + kind_ +
         static_cast<char>('0' + static_cast<int>(phase_)) + what_;
}

std::string Agreed::warning(const std::string& method) const {
  std::string s = "cache_compile of " + method + ": rank " + std::to_string(rank) + " failed in phase " +
                  phase_name(phase) + " (" + phase_work(phase) + "): " + cause;
  if (failed > 1) s += " (" + std::to_string(failed) + " ranks failed)";
  return s + "; every rank runs " + method + " uncached";
}

Agreed decide(const std::vector<std::string>& all, const LocalFailure& mine, int me, const std::string& method) {
  Agreed out;
  int fatal = 0, first_fatal = -1;
  for (std::size_t r = 0; r < all.size(); ++r) {
    if (all[r].empty()) continue;
    ++out.failed;
    const Carried c = parse(all[r]);
    if (c.severity == LocalFailure::Severity::fatal) {
      if (first_fatal < 0) first_fatal = static_cast<int>(r);
      ++fatal;
    } else if (out.rank < 0) {
      out.rank = static_cast<int>(r);
      out.phase = c.phase;
      out.cause = c.cause;
    }
  }
  if (fatal == 0) {
    out.survivable = out.failed > 0;
    return out;
  }
  if (fatal == static_cast<int>(all.size()) && mine.original_) std::rethrow_exception(mine.original_);
  const Carried c = parse(all[static_cast<std::size_t>(first_fatal)]);
  std::string what = "cache_compile of " + method + ": rank " + std::to_string(first_fatal) + " failed in phase " +
                     phase_name(c.phase) + " (" + phase_work(c.phase) + "): " + c.cause;
  if (out.failed > 1)
    what += " (" + std::to_string(out.failed) + " of " + std::to_string(all.size()) + " ranks failed)";
  if (first_fatal != me) what += "; this rank (" + std::to_string(me) + ") stops with it";
  throw_kind(c.kind, what);
}

Agreed agree_reduced(std::uint64_t reduced_flag, const Transport& net, const LocalFailure& mine,
                     const std::string& method, const mpi::Step& step) {
  if (reduced_flag == 0) return {};
  const mpi::Step naming{step.name + ": naming the failures", step.timeout_s};
  return decide(net.allgather(mine.encode(), naming), mine, net.rank(), method);
}

Agreed agree(const Transport& net, const LocalFailure& mine, const std::string& method, const mpi::Step& step) {
  std::vector<std::uint64_t> flag{mine.flag()};
  net.allreduce_max(flag, step);
  return agree_reduced(flag[0], net, mine, method, step);
}

}  // namespace npucache::coord

#include "process/context.h"

#include "process/env.h"

#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <cstdlib>

namespace npucache::process {
namespace {

std::atomic<Context*> g_current{nullptr};
thread_local Context* t_bound = nullptr;

// The Scopes alive, in the order they were made: the last is current. A
// Scope that ends leaves the list wherever it is in it (a program may end
// an outer one first), so an ended context is never current again.
std::mutex g_scopes_mu;
std::vector<Context*> g_scopes;  // under g_scopes_mu
std::atomic<World (*)()> g_world_probe{nullptr};

std::string host_name() {
  // The system's bound on a host name, and room for its terminating NUL
  // (gethostname may truncate without one at the bound).
  const long max = ::sysconf(_SC_HOST_NAME_MAX);
  std::string name(static_cast<std::size_t>(max > 0 ? max : 255) + 1, '\0');
  if (::gethostname(name.data(), name.size() - 1) != 0) return "";
  name.resize(name.find('\0'));
  return name;
}

Context& program_context() {
  // Never destroyed, nor its services: it is flushed at exit (background
  // commits finished, statistics written), and what runs after that keeps
  // using it -- other threads of a program that called exit() while they
  // were in a first call (holding services), objects of the program
  // destroyed later (a static holding a compiled method). What they do
  // then is not flushed.
  static Context* ctx = [] {
    auto* c = new Context(default_env());
    std::atexit([] { program_context().flush_for_exit(); });
    return c;
  }();
  return *ctx;
}

}  // namespace

void set_world_probe(World (*probe)()) { g_world_probe.store(probe); }

World world() {
  auto* probe = g_world_probe.load();
  return probe ? probe() : World{};
}

Context& Context::current() {
  if (t_bound) return *t_bound;
  if (Context* c = g_current.load(std::memory_order_acquire)) return *c;
  return program_context();
}

Context::Context(std::shared_ptr<Env> env)
    : env_(env ? std::move(env) : default_env()), host_(host_name()), pid_(static_cast<long>(::getpid())) {}

Context::~Context() { shutdown(); }

Identity Context::identity() const {
  const World w = world();
  return {w.rank, w.size, w.mpi, host_, pid_};
}

void* Context::find_or_make(std::type_index type, const std::function<std::shared_ptr<void>()>& make) {
  {
    std::lock_guard lock(mu_);
    for (const auto& s : services_)
      if (s.type == type) return s.object.get();
  }
  std::lock_guard making(making_);
  {
    std::lock_guard lock(mu_);
    for (const auto& s : services_)
      if (s.type == type) return s.object.get();
  }
  std::shared_ptr<void> object = make();  // may make the services it uses first
  std::lock_guard lock(mu_);
  services_.push_back({type, object});
  return object.get();
}

void Context::on_flush(std::function<void()> hook) {
  std::lock_guard lock(mu_);
  flush_hooks_.push_back(std::move(hook));
}

void Context::flush() {
  const Bind bind(*this);  // what the hooks use is this context's
  std::vector<std::function<void()>> hooks;
  {
    std::lock_guard lock(mu_);
    hooks = flush_hooks_;
  }
  for (auto it = hooks.rbegin(); it != hooks.rend(); ++it) (*it)();
}

void Context::flush_for_exit() {
  ending_.store(true);
  flush();
}

void Context::shutdown() {
  const Bind bind(*this);  // the services' destructors use this context's
  flush_for_exit();
  {
    std::lock_guard lock(mu_);
    flush_hooks_.clear();  // the services they flush go now
  }
  struct Again {  // services may be made again afterwards
    std::atomic<bool>& ending;
    ~Again() { ending.store(false); }
  } again{ending_};
  // Not under making_: a service's destructor may wait for a thread (the
  // commit queue's) that gets services.
  for (;;) {
    std::shared_ptr<void> last;
    {
      std::lock_guard lock(mu_);
      if (services_.empty()) return;
      last = std::move(services_.back().object);
      services_.pop_back();
    }
    last.reset();  // outside the lock: its destructor may use other services
  }
}

Context::Bind::Bind(Context& c) : previous_(t_bound) { t_bound = &c; }

Context::Bind::~Bind() { t_bound = previous_; }

Context::Scope::Scope(std::shared_ptr<Env> env) : ctx_(std::make_unique<Context>(std::move(env))) {
  std::lock_guard lock(g_scopes_mu);
  g_scopes.push_back(ctx_.get());
  g_current.store(ctx_.get(), std::memory_order_release);
}

Context::Scope::~Scope() {
  ctx_->shutdown();
  std::lock_guard lock(g_scopes_mu);
  g_scopes.erase(std::find(g_scopes.begin(), g_scopes.end(), ctx_.get()));
  g_current.store(g_scopes.empty() ? nullptr : g_scopes.back(), std::memory_order_release);
}

}  // namespace npucache::process

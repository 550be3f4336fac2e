// The process context: what a program using npucache has once per process,
// owned in one place. It holds
// - the outside world (env.h: the file system and the clock), which tests
//   replace to inject faults;
// - who this process is in its job (Identity: the world rank and size,
//   set by the layer that initialises MPI; host and pid), so that no layer
//   above asks MPI itself;
// - the process-wide objects of every layer (services: the tuning table,
//   the statistics' counters, the background commit queue, the remote
//   tiers, the registry of used entries, the coordinator's communicator,
//   ...), each made on first use and destroyed in the reverse order of
//   making. A service that needs another gets it in its constructor, so
//   what it uses outlives it (the commit queue drains before the counters
//   flush).
//
// A program gets a context made on first use, flushed at exit (normal
// return from main or exit()) and never destroyed, services included:
// other threads may still be in a call when exit() runs. It may also own
// one (Context::Scope), which is then current until the scope ends and is
// shut down there: statistics flushed, background commits drained, its
// services destroyed, explicitly and in order. Tests use a scope with a
// fault-injecting Env.
//
// Thread safety: every member may be called from any thread. A service's
// own members say what they allow. Scopes are made and ended by one thread
// while no other thread of the program uses npucache (a service's own
// thread works in its own context: Bind); an outer one may end first. A
// context's flush and shutdown work in that context, current or not.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <typeindex>
#include <utility>
#include <vector>

namespace npucache::process {

class Env;

// The world of the job, as the layer that initialises MPI knows it.
struct World {
  int rank = 0;
  int size = 1;
  bool mpi = false;  // MPI is initialised (and not finalised)
};
// Registered by the MPI layer when the library loads (src/mpi/session.cpp):
// asked each time, so MPI initialised by the program itself is seen too.
// Without one, a process is a world of one.
void set_world_probe(World (*probe)());
World world();

// Who this process is in its job.
struct Identity {
  int world_rank = 0;
  int world_size = 1;
  bool mpi = false;  // the world comes from MPI
  std::string host;  // gethostname()
  long pid = 0;
};

class Context {
 public:
  // The current context: the calling thread's bound one (Bind), else the
  // latest Scope's still alive, else the program's (made on first use,
  // flushed at exit).
  static Context& current();

  explicit Context(std::shared_ptr<Env> env);
  ~Context();  // shutdown()
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  Env& env() const { return *env_; }

  // The world from the probe above, the host and the process.
  Identity identity() const;

  // The service of type T, made (T(Context&) or T()) on first use. T must
  // not be made while the context shuts down (a service used by a
  // destructor is made before it: get it in the constructor).
  template <class T>
  T& get() {
    return *static_cast<T*>(find_or_make(typeid(T), [this] { return make<T>(); }));
  }

  // A service whose work must be finished at a point (statistics written,
  // background commits done) registers it in its constructor, after getting
  // the services it uses: flush() runs the hooks in the reverse order of
  // registration (the commit queue drains before the counters it feeds are
  // written).
  void on_flush(std::function<void()> hook);
  void flush();
  // The last flush: that of shutdown() or of the program's exit. A service
  // with a thread of its own stops it in its hook when ending() is true
  // (after that flush, services go or exit's static destructors run).
  void flush_for_exit();
  bool ending() const { return ending_.load(); }

  // Flushes, then destroys every service in the reverse order of making.
  // Services may be made again afterwards. Idempotent.
  void shutdown();

  // Makes `c` the calling thread's current context while it lives, over
  // the process's (the innermost Scope's or the program's): a service's own
  // thread (the commit queue's) works in the context that owns it, never in
  // a Scope the program makes and ends meanwhile. The context must outlive
  // it (the service joins its thread when destroyed).
  class Bind {
   public:
    explicit Bind(Context& c);
    ~Bind();
    Bind(const Bind&) = delete;
    Bind& operator=(const Bind&) = delete;

   private:
    Context* previous_;
  };

  // Makes a new context current until the scope ends, then shuts it down;
  // the latest Scope still alive (else the program's context) is current
  // again, also when an outer Scope ends before an inner one.
  class Scope {
   public:
    explicit Scope(std::shared_ptr<Env> env = nullptr);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    Context& context() { return *ctx_; }

   private:
    std::unique_ptr<Context> ctx_;
  };

 private:
  struct Service {
    std::type_index type;
    std::shared_ptr<void> object;
  };
  template <class T>
  static std::shared_ptr<void> make_in(Context& c) {
    if constexpr (std::is_constructible_v<T, Context&>)
      return std::make_shared<T>(c);
    else
      return std::make_shared<T>();
  }
  template <class T>
  std::shared_ptr<void> make() {
    return make_in<T>(*this);
  }
  void* find_or_make(std::type_index type, const std::function<std::shared_ptr<void>()>& make);

  std::shared_ptr<Env> env_;
  mutable std::mutex mu_;  // services_
  std::string host_;
  long pid_ = 0;
  std::recursive_mutex making_;  // one service made at a time (it may get others)
  std::vector<Service> services_;
  std::vector<std::function<void()>> flush_hooks_;  // under mu_
  std::atomic<bool> ending_{false};
};

}  // namespace npucache::process

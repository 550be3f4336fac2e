// A separate process for the process-context tests (test_process_context.cpp):
// what needs a process of its own -- exit() and the end of main, a fresh
// process's view of a directory, another writer.
//
//   process_worker run DIR METHOD [--g] [--ge-cache] [--k K] [--remote URL]
//     one first call of Hooked::f (--g: Hooked::g) cached as METHOD; prints "status
//     <outcome> cached <0|1> compiles <n>" and "result <values...>".
//   process_worker exit-race DIR DELAY_MS
//     a thread makes first calls of new cached methods, one after another;
//     another thread calls exit(0) DELAY_MS after the first of them has
//     started compiling. The program's own exit work (an exit handler it
//     registered first) takes 300 ms, while the first thread goes on.
//     Prints "exiting" before exit().
//   process_worker outer-commit DIR URL MS
//     a first call served by the remote tier (its commit queued on the
//     process's context), then at once a ProcessContext of the program's
//     own that lasts MS milliseconds, then a second one that makes a first
//     call: prints "done".
//   process_worker mpi-identity DIR
//     under mpiexec: MPI initialised by the program itself (MPI_Init, no
//     MpiSession), then a first call; prints "rank <R> entry <entry path>".
#include <npucache/npucache.h>

#include <mpi.h>

#include "process/process_models.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>

using namespace npucache;
using testing_support::Hooked;
using testing_support::hooked_input;
using testing_support::hooked_options;

namespace {

int run(int argc, char** argv) {
  CacheOptions o = hooked_options(argv[2], argv[3]);
  double k = 1.0;
  bool g = false;
  for (int i = 4; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--g")
      g = true;
    else if (a == "--ge-cache")
      o.ge_cache = true;
    else if (a == "--k")
      k = std::stod(argv[++i]);
    else if (a == "--remote")
      o.remote.url = argv[++i];
  }
  Hooked m(k);
  auto fn = cache_compile(m, g ? &Hooked::g : &Hooked::f, o);
  const std::vector<float> out = fn(hooked_input()).to_vector();
  std::printf("status %s cached %d compiles %zu\nresult", std::string(outcome_name(fn.status().outcome)).c_str(),
              fn.status().cached ? 1 : 0, fn.compiles());
  for (float v : out) std::printf(" %g", v);
  std::printf("\n");
  return 0;
}

int exit_race(char** argv) {
  // The program's own exit work, after npucache's (handlers run in the
  // reverse order of registration): the other thread goes on meanwhile.
  std::atexit([] { std::this_thread::sleep_for(std::chrono::milliseconds(300)); });
  const std::string dir = argv[2];
  const int delay_ms = std::stoi(argv[3]);
  std::mutex mu;
  std::condition_variable cv;
  bool compiling = false;
  testing_support::compile_hook() = [&] {
    std::lock_guard lock(mu);
    compiling = true;
    cv.notify_all();
  };
  std::thread exiter([&] {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return compiling; });
    lock.unlock();
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    std::printf("exiting\n");
    std::fflush(stdout);
    std::exit(0);
  });
  std::thread caller([&] {
    for (int i = 0;; ++i) {
      Hooked m(2.0 + i);
      CacheOptions o = hooked_options(dir, "f" + std::to_string(i));
      o.compile.config->autotune_candidates = 8;
      o.compile.config->autotune_min_time_us = 500;
      auto fn = cache_compile(m, &Hooked::f, o);
      (void)fn(hooked_input());
    }
  });
  caller.join();
  exiter.join();
  return 1;
}

int outer_commit(char** argv) {
  {
    CacheOptions o = hooked_options(argv[2], "f");
    o.remote.url = argv[3];
    Hooked m;
    auto fn = cache_compile(m, &Hooked::f, o);
    (void)fn(hooked_input());
    std::printf("first %s\n", std::string(outcome_name(fn.status().outcome)).c_str());
  }
  {
    ProcessContext own;
    std::this_thread::sleep_for(std::chrono::milliseconds(std::stoi(argv[4])));
  }
  {
    ProcessContext own;
    Hooked m(3.0);
    auto fn = cache_compile(m, &Hooked::g, hooked_options(argv[2], "g"));
    (void)fn(hooked_input());
  }
  std::printf("done\n");
  return 0;
}

int mpi_identity(int argc, char** argv) {
  ProcessContext own;  // made before MPI is
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  {
    Hooked m;
    auto fn = cache_compile(m, &Hooked::f, hooked_options(argv[2], "f"));
    (void)fn(hooked_input());
    std::printf("rank %d entry %s\n", rank, fn.status().entry.c_str());
    std::fflush(stdout);
  }
  own.flush();
  MPI_Finalize();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc >= 4 && std::strcmp(argv[1], "run") == 0) return run(argc, argv);
    if (argc == 4 && std::strcmp(argv[1], "exit-race") == 0) return exit_race(argv);
    if (argc == 5 && std::strcmp(argv[1], "outer-commit") == 0) return outer_commit(argv);
    if (argc == 3 && std::strcmp(argv[1], "mpi-identity") == 0) return mpi_identity(argc, argv);
    std::fprintf(stderr, "usage: process_worker run|exit-race|outer-commit|mpi-identity ...\n");
    return 2;
  } catch (const std::exception& e) {
    std::printf("error %s\n", e.what());
    return 3;
  }
}

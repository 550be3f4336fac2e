// Artifact exchange throughput under mpirun: the coordinator's exchange
// (split into a group communicator, size broadcast, chunked broadcast)
// against a raw MPI_Bcast of the same bytes on MPI_COMM_WORLD, interleaved
// in one run; receivers allocate their buffer in both. Rank 0 prints the
// ratio.
//   mpirun -np 8 bench_exchange [MiB]
#include <npucache/mpi.h>

#include "mpi/comm.h"
#include "harness.h"

#include <mpi.h>

#include <cstdio>
#include <string>

using namespace npucache;

namespace {
const mpi::Step kStep{"bench_exchange", 600};
}

int main(int argc, char** argv) {
  MpiSession mpi(&argc, &argv);
  const std::size_t mib = argc > 1 ? std::stoul(argv[1]) : 16;
  const mpi::Comm world = mpi::Comm::world();
  const std::size_t n = mib << 20;
  std::string payload(n, '\0');
  if (world.rank() == 0)
    for (std::size_t i = 0; i < n; ++i) payload[i] = static_cast<char>((i * 131) % 251);
  constexpr int kTrials = 9;
  std::vector<double> exch, raw;
  for (int t = 0; t < kTrials + 1; ++t) {
    std::string data = world.rank() == 0 ? payload : std::string();
    world.barrier(kStep);
    double t0 = mpi::wtime();
    {
      mpi::Comm group = world.split(0, world.rank(), kStep);
      group.broadcast(data, 0, kStep);
      if (data.size() != n) std::abort();
    }
    world.barrier(kStep);
    double t1 = mpi::wtime();
    std::string buf = world.rank() == 0 ? payload : std::string();
    world.barrier(kStep);
    double t2 = mpi::wtime();
    // Receivers allocate their buffer in both variants (an artifact's size
    // is known only when it arrives).
    if (world.rank() != 0) buf.resize(n);
    MPI_Bcast(buf.data(), static_cast<int>(n), MPI_BYTE, 0, MPI_COMM_WORLD);
    world.barrier(kStep);
    double t3 = mpi::wtime();
    if (t > 0) {  // the first round warms up connections
      exch.push_back(t1 - t0);
      raw.push_back(t3 - t2);
    }
  }
  if (world.rank() == 0) {
    const double e = perf::median(exch), r = perf::median(raw);
    std::printf("artifact exchange of %zu MiB to %d ranks, median of %d interleaved trials\n", mib, world.size(), kTrials);
    std::printf("  coordinator exchange   %8.2f ms  %7.3f GB/s\n", e * 1e3, static_cast<double>(n) / e / 1e9);
    std::printf("  raw MPI_Bcast          %8.2f ms  %7.3f GB/s\n", r * 1e3, static_cast<double>(n) / r / 1e9);
    std::printf("  ratio exchange/raw throughput %6.1f%%  (goal >= 70%%)\n", 100.0 * r / e);
  }
  return 0;
}

// The coordinator's key all-gather, two ways side by side in one run
// (interleaved trials): MPI_Iallgatherv on every rank (Open MPI's libnbc
// sends each record to every rank: W - 1 messages per rank) and the
// host-by-host all-gather the coordinator uses (coord/host_allgather.h:
// R - 1 messages into each host's leader, a Bruck exchange of ceil(log2 H)
// rounds between leaders, a tree down each host). Records are like the
// coordinator's (graph key, cost, flags, store identity), equal within a
// tensor-parallel pair. Rank 0 prints medians and the messages a rank sends.
//   mpirun -np N bench_keys [trials] [--json FILE]
#include <npucache/mpi.h>

#include "coord/context.h"
#include "coord/host_allgather.h"
#include "harness.h"
#include "mpi/comm.h"

#include <cstdio>
#include <fstream>
#include <string>

using namespace npucache;

int main(int argc, char** argv) {
  MpiSession mpi(&argc, &argv);
  int trials = 21;
  std::string json;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--json" && i + 1 < argc)
      json = argv[++i];
    else
      trials = std::stoi(a);
  }
  const mpi::Step step{"bench_keys", 600};
  const auto& ctx = coord::Context::get(600, nullptr);
  const mpi::Comm& comm = ctx.comm();
  const auto& hosts = ctx.hosts(600, nullptr);
  const int me = comm.rank(), world = comm.size();
  // A coordinator record: 32-hex graph key, cost, needs, holds, store identity.
  char rec[256];
  std::snprintf(rec, sizeof rec, "%032x\t1234.000000\t1\t0\t%032x:2049:%d", me / 2 + 0x5eed,
                hosts.host_of[static_cast<std::size_t>(me)] + 77, hosts.host_of[static_cast<std::size_t>(me)]);
  const std::string mine = rec;
  std::vector<double> flat, hier;
  for (int t = 0; t < trials + 1; ++t) {
    comm.barrier(step);
    double t0 = mpi::wtime();
    const auto a = comm.allgather(mine, step);
    comm.barrier(step);
    double t1 = mpi::wtime();
    const auto b = coord::host_allgather(comm, hosts, mine, step);
    comm.barrier(step);
    double t2 = mpi::wtime();
    if (a != b) MpiSession::abort(3);
    if (t > 0) {
      flat.push_back(t1 - t0);
      hier.push_back(t2 - t1);
    }
  }
  if (me != 0) return 0;
  int log2h = 0;
  while ((1 << log2h) < hosts.count()) ++log2h;
  const int per_host = (world + hosts.count() - 1) / hosts.count();
  const double f = perf::median(flat), h = perf::median(hier);
  std::printf(
      "key all-gather of %zu-byte records, %d ranks on %d host%s, median of %d interleaved trials (barriers "
      "included)\n",
      mine.size(), world, hosts.count(), hosts.count() == 1 ? "" : "s", trials);
  std::printf("  MPI_Iallgatherv (flat)   %8.3f ms   sends per rank %d\n", f * 1e3, 2 * (world - 1));
  std::printf("  host-by-host             %8.3f ms   sends per leader %d, per other rank 1 + tree\n", h * 1e3,
              log2h + 1);
  if (!json.empty())
    std::ofstream(json) << "{\"world\": " << world << ", \"hosts\": " << hosts.count() << ", \"flat_s\": " << f
                        << ", \"host_s\": " << h << ", \"per_host\": " << per_host << "}\n";
  return 0;
}

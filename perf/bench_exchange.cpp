// Artifact exchange under mpirun, three ways side by side in one run
// (interleaved trials): the coordinator's node-leader routes (once across
// the network per host, then within the host), flat routes (one binomial
// tree over ranks in rank order, ignoring hosts), and a raw MPI_Bcast of
// the same bytes on MPI_COMM_WORLD. For each: the median time and, on
// simulated hosts (tests/support/cluster.sh), the bytes that crossed
// between hosts, measured on each host's network interface (/proc/net/dev
// of the host's namespace, read by its lowest rank) minus what the same
// trial's barriers alone send. Rank 0 prints the table.
//   mpirun -np N bench_exchange [MiB] [trials] [--json FILE]
#include <npucache/mpi.h>

#include "coord/context.h"
#include "coord/routes.h"
#include "harness.h"
#include "mpi/comm.h"

#include <mpi.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

using namespace npucache;

namespace {

const mpi::Step kStep{"bench_exchange", 600};
constexpr int kTag = 300;

// Bytes received by this network namespace's eth0 (0 when it has none).
long long eth0_rx() {
  std::ifstream f("/proc/net/dev");
  std::string line;
  while (std::getline(f, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(0, colon);
    name.erase(0, name.find_first_not_of(' '));
    if (name != "eth0") continue;
    std::istringstream in(line.substr(colon + 1));
    long long rx = 0;
    in >> rx;
    return rx;
  }
  return 0;
}

void along(const std::map<int, coord::Route>& routes, const mpi::Comm& comm, std::string& data) {
  const auto it = routes.find(comm.rank());
  if (it == routes.end()) return;
  if (it->second.parent >= 0) data = comm.recv_from({it->second.parent}, kTag, kStep)[0];
  comm.send_to(it->second.children, kTag, data, kStep);
}

}  // namespace

int main(int argc, char** argv) {
  MpiSession mpi(&argc, &argv);
  std::size_t mib = 16;
  int trials = 7;
  std::string json;
  for (int i = 1, pos = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--json" && i + 1 < argc)
      json = argv[++i];
    else if (pos++ == 0)
      mib = std::stoul(a);
    else
      trials = std::stoi(a);
  }
  const auto& ctx = coord::Context::get(600, nullptr);
  const mpi::Comm& comm = ctx.comm();
  const auto& hosts = ctx.hosts(600, nullptr);
  const int me = comm.rank(), world = comm.size();
  // The lowest rank of each host reads the host's interface.
  bool leader = true;
  for (int r = 0; r < me; ++r)
    if (hosts.host_of[static_cast<std::size_t>(r)] == hosts.host_of[static_cast<std::size_t>(me)]) leader = false;
  const std::size_t n = mib << 20;
  std::string payload(n, '\0');
  for (std::size_t i = 0; i < n; ++i) payload[i] = static_cast<char>((i * 131) % 251);
  std::vector<int> receivers;
  for (int r = 1; r < world; ++r) receivers.push_back(r);
  const auto leader_routes = coord::node_leader_routes(0, receivers, hosts.host_of);
  const auto flat = coord::flat_routes(0, receivers);
  const char* names[] = {"node-leader routes", "flat routes", "MPI_Bcast", "barriers only"};
  std::map<int, std::vector<double>> secs, bytes;
  for (int t = 0; t < trials + 1; ++t) {
    for (int v = 0; v < 4; ++v) {
      std::string data = me == 0 ? payload : std::string();
      comm.barrier(kStep);
      const long long rx0 = leader ? eth0_rx() : 0;
      comm.barrier(kStep);
      const double t0 = mpi::wtime();
      if (v == 0) along(leader_routes, comm, data);
      if (v == 1) along(flat, comm, data);
      if (v == 2) {
        // Receivers allocate their buffer, as they must for an artifact.
        if (me != 0) data.resize(n);
        MPI_Bcast(data.data(), static_cast<int>(n), MPI_BYTE, 0, MPI_COMM_WORLD);
      }
      comm.barrier(kStep);
      const double t1 = mpi::wtime();
      if (v < 3 && data.size() != n) MpiSession::abort(3);
      const long long rx = leader ? eth0_rx() - rx0 : 0;
      long long total = 0;
      for (const auto& s : comm.allgather(std::to_string(rx), kStep)) total += std::stoll(s);
      if (t > 0) {  // the first round opens the connections
        secs[v].push_back(t1 - t0);
        bytes[v].push_back(static_cast<double>(total));
      }
    }
  }
  if (me != 0) return 0;
  // Logical counts: a transfer between ranks of different hosts carries n.
  auto across = [&](const std::map<int, coord::Route>& routes) {
    long long k = 0;
    for (const auto& [r, route] : routes)
      for (int c : route.children)
        k += hosts.host_of[static_cast<std::size_t>(c)] != hosts.host_of[static_cast<std::size_t>(r)];
    return k * static_cast<long long>(n);
  };
  long long remote = 0;  // receivers on another host than the root: a copy each
  for (int r : receivers) remote += hosts.host_of[static_cast<std::size_t>(r)] != hosts.host_of[0];
  remote *= static_cast<long long>(n);
  const double base = perf::median(bytes[3]);
  std::printf("artifact exchange of %zu MiB from rank 0 to %d ranks on %d host%s, median of %d interleaved trials\n",
              mib, world, hosts.count(), hosts.count() == 1 ? "" : "s", trials);
  std::printf("  %-20s %10s %9s %18s %18s\n", "", "ms", "GB/s", "bytes between hosts", "(counted)");
  std::ostringstream js;
  js << "{\"mib\": " << mib << ", \"world\": " << world << ", \"hosts\": " << hosts.count()
     << ", \"copies_to_other_hosts_bytes\": " << remote << ", \"variants\": {";
  for (int v = 0; v < 3; ++v) {
    const double s = perf::median(secs[v]);
    const double b = hosts.count() > 1 ? perf::median(bytes[v]) - base : 0;
    const long long counted = v == 0 ? across(leader_routes) : v == 1 ? across(flat) : -1;
    std::printf("  %-20s %10.2f %9.3f %18.0f %18s\n", names[v], s * 1e3, static_cast<double>(n) / s / 1e9, b,
                counted < 0 ? "-" : std::to_string(counted).c_str());
    js << (v ? ", " : "") << "\"" << names[v] << "\": {\"s\": " << s << ", \"bytes_between_hosts\": " << b
       << ", \"counted\": " << counted << "}";
  }
  js << "}}";
  const double lb = perf::median(bytes[0]) - base, fb = perf::median(bytes[1]) - base,
               bb = perf::median(bytes[2]) - base;
  if (hosts.count() > 1) {
    const double per_host = static_cast<double>(world) / hosts.count();
    std::printf("  node-leader / one copy per remote rank (%lld bytes): %.3f (goal <= 1/%g + 0.10 = %.3f)\n", remote,
                lb / static_cast<double>(remote), per_host, 1 / per_host + 0.10);
    std::printf("  node-leader / flat routes: %.3f; node-leader / MPI_Bcast: %.3f\n", lb / fb, lb / bb);
  }
  std::printf("  throughput node-leader / MPI_Bcast %.1f%%\n", 100.0 * perf::median(secs[2]) / perf::median(secs[0]));
  if (!json.empty()) std::ofstream(json) << js.str() << "\n";
  return 0;
}

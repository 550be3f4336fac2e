#include "coord/host_allgather.h"

#include <npucache/error.h>

#include "coord/routes.h"

#include <algorithm>
#include <cstdint>
#include <map>

namespace npucache::coord {
namespace {

constexpr int kToLeaderTag = kHostAllgatherTag;
constexpr int kDownTag = kHostAllgatherTag + 2;
constexpr int kRoundTag = kHostAllgatherTag + 4;  // + 2 * round

// Little-endian 32-bit integers, so hosts of any byte order agree.
void put(std::string& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

class Reader {
 public:
  explicit Reader(const std::string& s) : s_(s) {}
  std::uint32_t u32() {
    need(4);
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= static_cast<std::uint32_t>(static_cast<unsigned char>(s_[at_ + i])) << (8 * i);
    at_ += 4;
    return v;
  }
  std::string bytes(std::uint32_t n) {
    need(n);
    std::string out = s_.substr(at_, n);
    at_ += n;
    return out;
  }
  bool done() const { return at_ == s_.size(); }

 private:
  void need(std::size_t n) const {
    if (s_.size() - at_ < n)
      throw CommError("key all-gather: a truncated table (" + std::to_string(s_.size()) + " bytes)");
  }
  const std::string& s_;
  std::size_t at_ = 0;
};

// Several strings as one: count, then length and bytes of each.
std::string frame(const std::vector<std::string>& parts, std::size_t count) {
  std::string out;
  put(out, static_cast<std::uint32_t>(count));
  for (std::size_t i = 0; i < count; ++i) {
    put(out, static_cast<std::uint32_t>(parts[i].size()));
    out += parts[i];
  }
  return out;
}

std::vector<std::string> unframe(const std::string& s) {
  Reader in(s);
  std::vector<std::string> out(in.u32());
  for (auto& p : out) p = in.bytes(in.u32());
  return out;
}

}  // namespace

std::vector<std::string> bruck_allgather(const Transport& net, const std::vector<int>& peers, int me,
                                         const std::string& mine, int tag, const mpi::Step& step) {
  // After round k this participant holds the strings of positions
  // me .. me + 2^(k+1) - 1 (mod P), in that order.
  const int n = static_cast<int>(peers.size());
  std::vector<std::string> rel{mine};
  for (int d = 1, round = 0; d < n; d *= 2, ++round) {
    const std::size_t count = static_cast<std::size_t>(std::min(d, n - d));
    const int to = peers[static_cast<std::size_t>((me - d + n) % n)];
    const int from = peers[static_cast<std::size_t>((me + d) % n)];
    const auto got = unframe(net.sendrecv(frame(rel, count), to, from, tag + 2 * round, step));
    rel.insert(rel.end(), got.begin(), got.end());
  }
  std::vector<std::string> out(static_cast<std::size_t>(n));
  for (int j = 0; j < n; ++j) out[static_cast<std::size_t>((me + j) % n)] = std::move(rel[static_cast<std::size_t>(j)]);
  return out;
}

std::string encode_table(const std::vector<TableEntry>& entries) {
  std::string out;
  put(out, static_cast<std::uint32_t>(entries.size()));
  for (const auto& e : entries) {
    put(out, static_cast<std::uint32_t>(e.record.size()));
    out += e.record;
    // Ranks as runs (first, length): a tensor-parallel group is one run.
    std::vector<std::pair<int, int>> runs;
    for (int r : e.ranks) {
      if (!runs.empty() && runs.back().first + runs.back().second == r)
        ++runs.back().second;
      else
        runs.emplace_back(r, 1);
    }
    put(out, static_cast<std::uint32_t>(runs.size()));
    for (const auto& [first, n] : runs) {
      put(out, static_cast<std::uint32_t>(first));
      put(out, static_cast<std::uint32_t>(n));
    }
  }
  return out;
}

std::vector<TableEntry> decode_table(const std::string& bytes) {
  Reader in(bytes);
  std::vector<TableEntry> out(in.u32());
  for (auto& e : out) {
    e.record = in.bytes(in.u32());
    const std::uint32_t runs = in.u32();
    for (std::uint32_t i = 0; i < runs; ++i) {
      const std::uint32_t first = in.u32(), n = in.u32();
      for (std::uint32_t k = 0; k < n; ++k) e.ranks.push_back(static_cast<int>(first + k));
    }
  }
  if (!in.done()) throw CommError("key all-gather: trailing bytes after the table");
  return out;
}

std::vector<TableEntry> fold(const std::vector<std::pair<int, std::string>>& records) {
  std::map<std::string, std::size_t> index;
  std::vector<TableEntry> out;
  auto sorted = records;
  std::sort(sorted.begin(), sorted.end());
  for (const auto& [rank, rec] : sorted) {
    auto [it, fresh] = index.try_emplace(rec, out.size());
    if (fresh) out.push_back({rec, {}});
    out[it->second].ranks.push_back(rank);
  }
  return out;
}

std::vector<std::string> unfold(const std::vector<TableEntry>& entries, int world) {
  std::vector<std::string> out(static_cast<std::size_t>(world));
  std::vector<bool> seen(static_cast<std::size_t>(world), false);
  for (const auto& e : entries)
    for (int r : e.ranks) {
      if (r < 0 || r >= world || seen[static_cast<std::size_t>(r)])
        throw CommError("key all-gather: rank " + std::to_string(r) + " appears twice or out of range");
      seen[static_cast<std::size_t>(r)] = true;
      out[static_cast<std::size_t>(r)] = e.record;
    }
  for (int r = 0; r < world; ++r)
    if (!seen[static_cast<std::size_t>(r)]) throw CommError("key all-gather: no record of rank " + std::to_string(r));
  return out;
}

std::vector<std::string> host_allgather(const Transport& net, const Hosts& hosts, const std::string& mine,
                                        const mpi::Step& step) {
  const int me = net.rank(), world = net.size();
  if (world == 1) return {mine};
  const int nhosts = hosts.count();
  std::vector<std::vector<int>> members(static_cast<std::size_t>(nhosts));
  for (int r = 0; r < world; ++r)
    members[static_cast<std::size_t>(hosts.host_of[static_cast<std::size_t>(r)])].push_back(r);
  const int host = hosts.host_of[static_cast<std::size_t>(me)];
  const std::vector<int>& local = members[static_cast<std::size_t>(host)];
  const int leader = local.front();
  std::string table;
  if (me == leader) {
    // 1. The host's records, folded.
    const std::vector<int> others(local.begin() + 1, local.end());
    const auto parts = net.recv_from(others, kToLeaderTag, step);
    std::vector<std::pair<int, std::string>> records{{me, mine}};
    for (std::size_t i = 0; i < others.size(); ++i) records.emplace_back(others[i], parts[i]);
    // 2. Between the hosts' leaders.
    std::vector<int> leaders;
    for (const auto& m : members) leaders.push_back(m.front());
    const auto blocks = bruck_allgather(net, leaders, host, encode_table(fold(records)), kRoundTag, step);
    std::vector<TableEntry> all;
    for (const auto& b : blocks) {
      auto entries = decode_table(b);
      all.insert(all.end(), std::make_move_iterator(entries.begin()), std::make_move_iterator(entries.end()));
    }
    table = encode_table(all);
  } else {
    net.send_to({leader}, kToLeaderTag, mine, step);
  }
  // 3. Down the host, in a binomial tree from the leader.
  std::map<int, Route> routes;
  binomial_tree(local, routes);
  const Route& route = routes.at(me);
  if (route.parent >= 0) table = net.recv_from({route.parent}, kDownTag, step)[0];
  net.send_to(route.children, kDownTag, table, step);
  return unfold(decode_table(table), world);
}

std::vector<std::string> host_allgather(const mpi::Comm& comm, const Hosts& hosts, const std::string& mine,
                                        const mpi::Step& step) {
  return host_allgather(MpiTransport(comm), hosts, mine, step);
}

}  // namespace npucache::coord

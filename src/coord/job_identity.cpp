#include "coord/job_identity.h"

#include "coord/hash.h"
#include "mpi/comm.h"

#include <algorithm>
#include <map>

namespace npucache::coord {
namespace {

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) out += c == '\n' ? std::string("\\n") : c == '\\' ? std::string("\\\\") : std::string(1, c);
  return out;
}

std::string unescape(const std::string& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size()) {
      out += s[i + 1] == 'n' ? '\n' : s[i + 1];
      ++i;
    } else {
      out += s[i];
    }
  }
  return out;
}

const std::string* find(const JobIdentity& id, const std::string& name) {
  for (const auto& f : id)
    if (f.name == name) return &f.value;
  return nullptr;
}

// "have --pp 2" / "runs `npucache generate`".
std::string says(const std::string& name, const std::string* value, bool one) {
  if (name == "command") return std::string(one ? "runs" : "run") + " `npucache " + (value ? *value : "?") + "`";
  if (!value) return std::string(one ? "has" : "have") + " no " + name;
  return std::string(one ? "has " : "have ") + name + (value->empty() ? "" : " " + *value);
}

}  // namespace

std::string encode(const JobIdentity& id) {
  std::string out;
  for (const auto& f : id) out += escape(f.name) + "=" + escape(f.value) + "\n";
  return out;
}

JobIdentity decode(const std::string& bytes) {
  JobIdentity id;
  std::size_t at = 0;
  while (at < bytes.size()) {
    auto nl = bytes.find('\n', at);
    if (nl == std::string::npos) nl = bytes.size();
    const std::string line = bytes.substr(at, nl - at);
    const auto eq = line.find('=');
    if (eq != std::string::npos) id.push_back({unescape(line.substr(0, eq)), unescape(line.substr(eq + 1))});
    at = nl + 1;
  }
  return id;
}

std::string describe_mismatch(const std::vector<JobIdentity>& ids) {
  // Every field name, in the order first seen.
  std::vector<std::string> names;
  for (const auto& id : ids)
    for (const auto& f : id)
      if (std::find(names.begin(), names.end(), f.name) == names.end()) names.push_back(f.name);
  // A different subcommand explains every other difference.
  auto differs = [&](const std::string& name) {
    for (const auto& id : ids) {
      const std::string* a = find(id, name);
      const std::string* b = find(ids.front(), name);
      if ((a == nullptr) != (b == nullptr) || (a && *a != *b)) return true;
    }
    return false;
  };
  if (differs("command")) names = {"command"};
  std::string out;
  for (const auto& name : names) {
    if (!differs(name)) continue;
    std::map<std::string, std::vector<int>> ranks;  // value ("\x01" = none) -> ranks
    std::map<std::string, int> first;
    for (std::size_t r = 0; r < ids.size(); ++r) {
      const std::string* v = find(ids[r], name);
      const std::string key = v ? *v : std::string("\x01");
      ranks[key].push_back(static_cast<int>(r));
      first.emplace(key, static_cast<int>(r));
    }
    std::vector<std::pair<int, std::string>> order;  // by lowest rank
    for (const auto& [v, r] : first) order.emplace_back(r, v);
    std::sort(order.begin(), order.end());
    std::string part;
    for (const auto& [r, v] : order) {
      const auto& rs = ranks[v];
      part += (part.empty() ? "" : ", ") + mpi::rank_list(rs) + " " +
              says(name, v == "\x01" ? nullptr : &v, rs.size() == 1);
    }
    out += (out.empty() ? "" : "; ") + part;
  }
  return out;
}

void agree_job_identity(const JobIdentity& mine, double timeout_s) {
  const mpi::Comm world = mpi::Comm::world();
  if (world.size() == 1) return;
  const std::string bytes = encode(mine);
  const std::uint64_t h = stable_hash(bytes);
  std::vector<std::uint64_t> v{h, ~h};
  world.allreduce_max(v, {"job identity handshake", timeout_s});
  if (v[0] == ~v[1]) return;  // max == min: every rank has the same hash
  std::vector<JobIdentity> all;
  for (const auto& s : world.allgather(bytes, {"job identity handshake: naming the differences", timeout_s}))
    all.push_back(decode(s));
  std::string diff = describe_mismatch(all);
  if (diff.empty()) diff = "their identities hash differently but read the same (a different npucache build?)";
  throw JobMismatch("the ranks of this job were started with different settings: " + diff +
                    ". Start every rank with the same subcommand and options (in an MPMD launch, give each part the "
                    "same job options)");
}

}  // namespace npucache::coord

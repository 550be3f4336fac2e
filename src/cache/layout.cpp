#include "cache/layout.h"

#include <algorithm>

namespace npucache::cache {

std::string layout_text(const Layout& l) {
  return "world " + std::to_string(l.world_size) + " tp " + std::to_string(l.tp) + " pp " + std::to_string(l.pp);
}

void StoredLayouts::add(const EntryRecord& e) {
  const Producer& r = e.meta.rank;
  const std::pair<std::string, int> at{e.meta.model_info, r.world_size};
  int& tp = max_tp_rank_[at];
  tp = std::max(tp, r.tp_rank);
  int& pp = max_pp_rank_[at];
  pp = std::max(pp, r.pp_rank);
}

int StoredLayouts::tp_of(const std::string& model_info, int world_size) const {
  const auto it = max_tp_rank_.find({model_info, world_size});
  return it == max_tp_rank_.end() ? 1 : it->second + 1;
}

Layout StoredLayouts::of(const EntryRecord& e) const {
  const Producer& r = e.meta.rank;
  Layout l;
  l.world_size = r.world_size;
  l.tp = std::max(tp_of(e.meta.model_info, r.world_size), r.tp_rank + 1);
  // The pipeline stages of one layout are model_infos of the same world
  // size and tp degree.
  int max_pp_rank = r.pp_rank;
  for (const auto& [at, pp] : max_pp_rank_)
    if (at.second == r.world_size && tp_of(at.first, at.second) == l.tp) max_pp_rank = std::max(max_pp_rank, pp);
  l.pp = max_pp_rank + 1;
  return l;
}

namespace {

std::string rank_text(const Producer& r) {
  return "global_rank " + std::to_string(r.global_rank) + " (tp_rank " + std::to_string(r.tp_rank) + ", pp_rank " +
         std::to_string(r.pp_rank) + ")";
}

}  // namespace

std::vector<std::string> layout_differences(const Layout& stored, const Producer& stored_rank, const Layout& now,
                                            const Producer& now_rank) {
  std::vector<std::string> out;
  auto differ = [&](const char* what, int a, int b) {
    if (a != b) out.push_back(std::string(what) + ": stored " + std::to_string(a) + ", now " + std::to_string(b));
  };
  differ("world size", stored.world_size, now.world_size);
  differ("tp", stored.tp, now.tp);
  differ("pp", stored.pp, now.pp);
  if (stored_rank.global_rank != now_rank.global_rank || stored_rank.tp_rank != now_rank.tp_rank ||
      stored_rank.pp_rank != now_rank.pp_rank)
    out.push_back("rank: stored " + rank_text(stored_rank) + ", now " + rank_text(now_rank));
  return out;
}

}  // namespace npucache::cache

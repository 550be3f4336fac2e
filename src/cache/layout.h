// The parallel layout (world size, tensor- and pipeline-parallel degrees)
// a stored entry was made in, and what separates it from this process's:
// the words a miss after a layout change is explained in ("another layout
// (stored world 8 tp 2 pp 4, now world 4 tp 2 pp 2)").
//
// An entry records its world size and its rank's global, tp and pp rank,
// not the degrees: they are learnt from the stored entries of the same
// model class and world size (the tp degree from the entries sharing the
// entry's model_info, which the ranks of one pipeline stage do; the pp
// degree from the entries of that world size whose model_info has the same
// tp degree). The caller leaves out what its own job wrote. A cache holding
// two layouts of one world size and tp degree names the larger pp degree.
#pragma once

#include "cache/uses.h"
#include "format/records.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace npucache::cache {

struct Layout {
  int world_size = 1, tp = 1, pp = 1;
  bool operator==(const Layout& o) const { return world_size == o.world_size && tp == o.tp && pp == o.pp; }
  bool operator!=(const Layout& o) const { return !(*this == o); }
};

// "world 8 tp 2 pp 4"
std::string layout_text(const Layout& l);

class StoredLayouts {
 public:
  // Learns from one stored entry (of the model class being looked up).
  void add(const EntryRecord& e);
  // The layout `e` was made in (e was add()ed).
  Layout of(const EntryRecord& e) const;

 private:
  int tp_of(const std::string& model_info, int world_size) const;
  std::map<std::pair<std::string, int>, int> max_tp_rank_;  // (model_info, world size)
  // (model_info, world size) -> the largest pp rank of its entries
  std::map<std::pair<std::string, int>, int> max_pp_rank_;
};

// What differs between the place of a stored entry and this rank's, in
// the order a user reads them: world size, tp, pp, the rank
// ("world size: stored 8, now 4", "rank: stored global_rank 5 (tp_rank 1,
// pp_rank 2), now global_rank 5 (tp_rank 1, pp_rank 1)").
std::vector<std::string> layout_differences(const Layout& stored, const Producer& stored_rank, const Layout& now,
                                            const Producer& now_rank);

}  // namespace npucache::cache

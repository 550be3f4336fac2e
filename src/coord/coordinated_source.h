// dist::cache_compile's source: the MPI protocol of
// include/npucache/coordinator.h. The shared duty (timing, RNG refusal,
// persistence, reports) is MethodSource's; this class decides only how the
// artifact is obtained: collectively.
#pragma once

#include <npucache/coordinator.h>

#include "cache/source.h"
#include "coord/plan.h"
#include "coord/transport.h"

namespace npucache::coord {

class CoordinatedSource final : public cache::MethodSource {
 public:
  CoordinatedSource(std::shared_ptr<cache::MethodCache> cache, const dist::CoordinatorOptions& options,
                    ReportSink sink);

 private:
  // Automatic dynamic: this rank's profile from its cache, merged across the
  // job's ranks (a dim dynamic on any rank is dynamic on all, as PyTorch's
  // PGO merges rank profiles), so that the ranks keep tracing the same
  // graphs and sharing programs. One bounded all-reduce.
  void load_profile(const FlatArgs& args, std::vector<DimMark>& dims) override;
  std::shared_ptr<compiler::CompiledGraph> obtain(const FlatArgs& args, const compiler::TraceStep& trace,
                                                  const compiler::CompileStep& compile) override;
  // Step 6: one writer per store commits the new entries (and the objects
  // its store lacks) of every rank sharing it: the others send it theirs
  // and wait for its answer.
  void persist_collectively(const Transport& comm, const std::vector<RankInfo>& infos, const Plan& plan,
                            const compiler::CompiledGraph& g, const cache::GraphId& id, const std::string& bytes,
                            bool bytes_have_program);

  dist::CoordinatorOptions options_;
  dist::StepReport steps_;
};

}  // namespace npucache::coord

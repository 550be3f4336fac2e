// A tensor- and pipeline-parallel model under MPI, cached with
// dist::cache_compile: tp = 2 x pp = 2 on 4 ranks.
//
//   mpirun -np 4 tp_pp [CACHE_DIR]
//
// The model is a stack of 4 MLP layers (Megatron style: a column-parallel
// linear, GELU, a row-parallel linear that all-reduces over tp, a residual),
// 2 per pipeline stage; the first stage sends its activations to the second,
// which returns the output. The tp ranks of a stage trace equal graphs, so
// the coordinator compiles one program per stage and method and broadcasts
// it to the stage's other rank; each rank's entry goes into the cache
// (<model_info>/world4global_rank<R>/<func>). A second run loads every
// rank's entry ("hit on 4 of 4 ranks").
//
// Every rank compares its cached results with its eager ones, and the last
// stage also with an unsharded single-process model of the same weights;
// rank 0 prints the summary and the job exits 1 when any rank differs.
#include <npucache/npucache.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

using namespace npucache;

namespace example {

constexpr int kTp = 2, kPp = 2;
constexpr int64_t kDim = 16, kFfn = 32, kLayers = 4;

// The weight of layer `layer`'s matrix `which` at [row, col] of the full
// (unsharded) matrix: every rank fills its shard of the same model.
inline float weight(int64_t layer, int which, int64_t row, int64_t col) {
  return 0.3f * std::sin(0.7f * static_cast<float>(row) + 0.3f * static_cast<float>(col) +
                         1.3f * static_cast<float>(layer) + static_cast<float>(which));
}

// Fills `t` [rows, cols] with rows [row0, row0 + rows) and columns
// [col0, col0 + cols) of the full matrix.
inline void fill(Tensor& t, int64_t layer, int which, int64_t row0, int64_t col0) {
  const std::vector<int64_t> d = t.dims();
  std::vector<float> v;
  for (int64_t r = 0; r < d[0]; ++r)
    for (int64_t c = 0; c < d[1]; ++c) v.push_back(weight(layer, which, row0 + r, col0 + c));
  t.copy_from(v);
}

// One pipeline stage's layers on one tensor-parallel rank.
class StageModel : public nn::Module {
 public:
  StageModel(int tp_rank, int pp_rank) : first_(pp_rank == 0), last_(pp_rank == kPp - 1) {
    const int64_t per_stage = kLayers / kPp, ffn_shard = kFfn / kTp;
    for (int64_t i = 0; i < per_stage; ++i) {
      const int64_t layer = pp_rank * per_stage + i;
      auto up = std::make_shared<nn::ColumnParallelLinear>(kDim, kFfn, kTp);  // [kFfn/tp, kDim]
      auto down = std::make_shared<nn::RowParallelLinear>(kFfn, kDim, kTp);   // [kDim, kFfn/tp]
      register_module("up" + std::to_string(layer), up);
      register_module("down" + std::to_string(layer), down);
      fill(up->weight, layer, 0, tp_rank * ffn_shard, 0);
      fill(down->weight, layer, 1, 0, tp_rank * ffn_shard);
      layers_.push_back({up, down});
    }
  }

  // x [B, S, kDim]: the input on the first stage; later stages receive
  // their input from the previous stage and use x for its shape only.
  Tensor forward(const Tensor& x) {
    Tensor h = first_ ? x : ops::recv({x.size(0), x.size(1), kDim}, DType::f32, "prev");
    for (const auto& [up, down] : layers_) h = h + down->forward(ops::gelu(up->forward(h)));
    return last_ ? h : ops::send(h, "next");
  }
  Tensor prompt(const Tensor& x) { return forward(x); }
  Tensor decode(const Tensor& x) { return forward(x); }

 private:
  struct Layer {
    std::shared_ptr<nn::ColumnParallelLinear> up;
    std::shared_ptr<nn::RowParallelLinear> down;
  };
  bool first_, last_;
  std::vector<Layer> layers_;
};

// The same model, unsharded, in one process: the reference of the output.
class FullModel : public nn::Module {
 public:
  FullModel() {
    for (int64_t layer = 0; layer < kLayers; ++layer) {
      auto up = std::make_shared<nn::Linear>(kDim, kFfn, false);
      auto down = std::make_shared<nn::Linear>(kFfn, kDim, false);
      register_module("up" + std::to_string(layer), up);
      register_module("down" + std::to_string(layer), down);
      fill(up->weight, layer, 0, 0, 0);
      fill(down->weight, layer, 1, 0, 0);
      layers_.emplace_back(up, down);
    }
  }
  Tensor forward(const Tensor& x) {
    Tensor h = x;
    for (const auto& [up, down] : layers_) h = h + down->forward(ops::gelu(up->forward(h)));
    return h;
  }

 private:
  std::vector<std::pair<std::shared_ptr<nn::Linear>, std::shared_ptr<nn::Linear>>> layers_;
};

}  // namespace example

namespace {

using namespace example;

Tensor input(int64_t batch, int64_t seq, float phase) {
  std::vector<float> v(static_cast<std::size_t>(batch * seq * kDim));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::cos(0.21f * static_cast<float>(i) + phase);
  return Tensor::from_vector(v, {batch, seq, kDim});
}

double difference(const Tensor& a, const Tensor& b) {
  const std::vector<float> x = a.to_vector(), y = b.to_vector();
  if (x.size() != y.size()) return INFINITY;
  double worst = 0;
  for (std::size_t i = 0; i < x.size(); ++i)
    worst = std::max(worst, std::fabs(double{x[i]} - y[i]) / (1.0 + std::fabs(double{y[i]})));
  return worst;
}

// The sum of `value` over every rank of the job.
float world_sum(Communicator& comm, float value) {
  // Host MPI calls only once the device's queued collectives have run.
  Platform::get().device(current_device()).synchronize();
  comm.all_reduce_sum(GroupRole::world, &value, 1);
  return value;
}

int run(const std::string& cache_dir) {
  constexpr double kTolerance = 1e-4;           // compiled kernels sum in another order
  auto comm = make_mpi_communicator(kTp, kPp);  // and makes it this thread's current one
  const int rank = comm->global_rank();
  set_current_device(rank % Platform::get().device_count());
  const int tp_rank = comm->rank(GroupRole::tp), pp_rank = comm->rank(GroupRole::pp);
  StageModel model(tp_rank, pp_rank);

  CacheOptions options;
  options.cache_dir = cache_dir;
  options.compile.arg_names = {"x"};
  auto prompt = dist::cache_compile(model, &StageModel::prompt, options);
  auto decode = dist::cache_compile(model, &StageModel::decode, options);

  // Every rank makes the same calls in the same order (SPMD): eager then
  // cached, prompt (5 tokens) then a decode step (1 token).
  const Tensor xp = input(2, 5, 0.0f), xd = input(2, 1, 2.0f);
  const Tensor eager_p = model.prompt(xp), cached_p = prompt(xp);
  const Tensor eager_d = model.decode(xd), cached_d = decode(xd);
  double worst = std::max(difference(cached_p, eager_p), difference(cached_d, eager_d));
  if (pp_rank == kPp - 1) {
    FullModel full;
    worst = std::max({worst, difference(cached_p, full.forward(xp)), difference(cached_d, full.forward(xd))});
  }
  const float differing = world_sum(*comm, worst <= kTolerance ? 0.0f : 1.0f);
  std::printf("rank %d (tp %d, pp %d): prompt %s, decode %s, cached vs eager %s (%.2e)\n", rank, tp_rank, pp_rank,
              std::string(outcome_name(prompt.status().outcome)).c_str(),
              std::string(outcome_name(decode.status().outcome)).c_str(), worst <= kTolerance ? "equal" : "DIFFERENT",
              worst);
  std::fflush(stdout);
  for (const auto* m : {&prompt, &decode}) {
    const float hits = world_sum(*comm, m->status().outcome == Outcome::hit ? 1.0f : 0.0f);
    const float compiled = world_sum(*comm, m->status().outcome == Outcome::compiled ? 1.0f : 0.0f);
    const float fetched = world_sum(*comm, m->status().outcome == Outcome::fetched ? 1.0f : 0.0f);
    if (rank == 0)
      std::printf("%s: hit on %d of %d ranks (compiled on %d, fetched by %d)\n", m == &prompt ? "prompt" : "decode",
                  static_cast<int>(hits), comm->layout().world_size, static_cast<int>(compiled),
                  static_cast<int>(fetched));
  }
  if (rank == 0)
    std::printf("cached results %s\n",
                differing == 0.0f ? "equal the eager ones on every rank" : "DIFFER from the eager ones on some rank");
  return differing == 0.0f ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  MpiSession mpi(&argc, &argv);
  try {
    return run(argc > 1 ? argv[1] : "");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tp_pp: rank %d: %s\n", MpiSession::world_rank(), e.what());
    std::fflush(stderr);
    // The other ranks may wait in a collective: take the job down.
    if (MpiSession::world_size() > 1) MpiSession::abort(1);
    return 1;
  }
}

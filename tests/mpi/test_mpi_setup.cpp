// MPI set-up that cannot go wrong (4 ranks, tp=4): a program that creates
// its communicator but never calls set_current_communicator gets the
// reduced result on every rank; one that creates none gets a clear error on
// every rank, never a per-rank partial sum.
#include <npucache/npucache.h>

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

using namespace npucache;
namespace fs = std::filesystem;

namespace {

constexpr int64_t kIn = 8, kOut = 4;

// y = x W^T with W sharded by columns over tp ranks (a Megatron row-parallel
// linear): each rank holds W[:, r*kIn/tp : (r+1)*kIn/tp] and its slice of x.
struct RowParallel : nn::Module {
  std::shared_ptr<nn::RowParallelLinear> proj;
  RowParallel(int tp, int rank) {
    proj = register_module("proj", std::make_shared<nn::RowParallelLinear>(kIn, kOut, tp));
    const int64_t cols = kIn / tp;
    std::vector<float> w;
    for (int64_t o = 0; o < kOut; ++o)
      for (int64_t c = 0; c < cols; ++c) w.push_back(weight(o, rank * cols + c));
    proj->weight.copy_from(w);
  }
  static float weight(int64_t o, int64_t i) { return 0.1f * static_cast<float>(o + 1) - 0.05f * static_cast<float>(i); }
  static float x(int64_t r, int64_t i) { return 0.5f + static_cast<float>(r) - 0.25f * static_cast<float>(i); }
  Tensor forward(const Tensor& x_shard) { return proj->forward(x_shard); }
};

Tensor x_shard(int tp, int rank) {
  const int64_t cols = kIn / tp;
  std::vector<float> v;
  for (int64_t r = 0; r < 2; ++r)
    for (int64_t c = 0; c < cols; ++c) v.push_back(RowParallel::x(r, rank * cols + c));
  return Tensor::from_vector(v, {2, cols});
}

std::vector<float> expected() {
  std::vector<float> y;
  for (int64_t r = 0; r < 2; ++r)
    for (int64_t o = 0; o < kOut; ++o) {
      double s = 0;
      for (int64_t i = 0; i < kIn; ++i) s += RowParallel::x(r, i) * RowParallel::weight(o, i);
      y.push_back(static_cast<float>(s));
    }
  return y;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-4) << what << " element " << i;
}

std::string cache_dir() {
  return (fs::temp_directory_path() / ("npucache-setup-" + std::to_string(MpiSession::world_size()))).string();
}

}  // namespace

TEST(MpiSetup, CreatedCommunicatorIsCurrentWithoutSetCurrentCommunicator) {
  const int world = MpiSession::world_size(), rank = MpiSession::world_rank();
  ASSERT_EQ(world, 4) << "run with 4 ranks";
  set_current_device(rank % Platform::get().device_count());
  auto comm = make_mpi_communicator(4, 1);  // no set_current_communicator
  EXPECT_EQ(&current_communicator(), comm.get());
  RowParallel m(4, rank);
  const Tensor x = x_shard(4, rank);
  expect_close(m.forward(x).to_vector(), expected(), "eager");
  auto compiled = compile(m, &RowParallel::forward);
  expect_close(compiled(x).to_vector(), expected(), "compiled");
  CacheOptions o;
  o.cache_dir = cache_dir();
  auto cached = dist::cache_compile(m, &RowParallel::forward, o);
  expect_close(cached(x).to_vector(), expected(), "cached");
  comm.reset();
  EXPECT_NE(current_communicator().layout().world_size, 4);  // unset when destroyed
  if (rank == 0) fs::remove_all(cache_dir());
}

TEST(MpiSetup, NoCommunicatorIsAClearErrorOnEveryRank) {
  const int rank = MpiSession::world_rank();
  set_current_device(rank % Platform::get().device_count());
  RowParallel m(4, rank);
  const Tensor x = x_shard(4, rank);
  auto expect_error = [](const std::function<void()>& f, const char* what) {
    try {
      f();
      ADD_FAILURE() << what << ": a partial result instead of an error";
    } catch (const CommError& e) {
      EXPECT_NE(std::string(e.what()).find("make_mpi_communicator(tp, pp)"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("partial result"), std::string::npos) << e.what();
    }
  };
  expect_error([&] { m.forward(x).to_vector(); }, "eager");
  Platform::get().device(current_device()).synchronize();
  auto compiled = compile(m, &RowParallel::forward);
  expect_error([&] { compiled(x).to_vector(); }, "compiled");
}

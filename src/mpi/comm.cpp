#include "mpi/comm.h"

#include <npucache/error.h>
#include <npucache/mpi.h>

#include "mpi/check.h"
#include "mpi/detail/fault.h"

#include <algorithm>
#include <climits>
#include <cstring>

namespace npucache::mpi {
namespace {

using detail::deadline_of;
using detail::wait_all;

int chunk_count(std::size_t bytes, std::size_t at) { return static_cast<int>(std::min(kChunkBytes, bytes - at)); }

std::size_t chunks_of(std::size_t bytes) { return (bytes + kChunkBytes - 1) / kChunkBytes; }

// Sizes and displacements of a variable-size collective; throws when the
// total does not fit MPI's int displacements.
std::vector<int> displacements(const std::vector<int>& sizes, const char* what) {
  std::vector<int> displs(sizes.size(), 0);
  long long total = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    displs[i] = static_cast<int>(total);
    total += sizes[i];
    if (total > INT_MAX) throw CommError(std::string(what) + ": records too large in total");
  }
  return displs;
}

std::vector<std::string> split_parts(const std::string& all, const std::vector<int>& sizes,
                                     const std::vector<int>& displs) {
  std::vector<std::string> out;
  out.reserve(sizes.size());
  for (std::size_t i = 0; i < sizes.size(); ++i)
    out.push_back(all.substr(static_cast<std::size_t>(displs[i]), static_cast<std::size_t>(sizes[i])));
  return out;
}

int record_size(const std::string& mine, const char* what) {
  if (mine.size() > static_cast<std::size_t>(INT_MAX)) throw CommError(std::string(what) + ": record too large");
  return static_cast<int>(mine.size());
}

// One request, waited for within the step.
void wait_one(MPI_Request& r, const Step& step, double deadline, MPI_Status* st = MPI_STATUS_IGNORE) {
  wait_all(&r, 1, step, deadline, st == MPI_STATUS_IGNORE ? MPI_STATUSES_IGNORE : st);
}

}  // namespace

struct Comm::Handle {
  MPI_Comm comm = MPI_COMM_NULL;
  bool owned = false;
  ~Handle() {
    int fin = 0;
    MPI_Finalized(&fin);
    if (owned && comm != MPI_COMM_NULL && !fin) MPI_Comm_free(&comm);
  }
};

double wtime() { return MPI_Wtime(); }

Comm::Comm() = default;
Comm::Comm(std::unique_ptr<Handle> h) : h_(std::move(h)) {
  if (h_ && h_->comm != MPI_COMM_NULL) {
    check(MPI_Comm_rank(h_->comm, &rank_), "MPI_Comm_rank");
    check(MPI_Comm_size(h_->comm, &size_), "MPI_Comm_size");
  }
}
Comm::~Comm() = default;
Comm::Comm(Comm&&) noexcept = default;
Comm& Comm::operator=(Comm&&) noexcept = default;

Comm Comm::world() {
  if (!MpiSession::initialized()) throw CommError("MPI is not initialised: create an MpiSession (run under mpirun)");
  auto h = std::make_unique<Handle>();
  h->comm = MPI_COMM_WORLD;
  return Comm(std::move(h));
}

int Comm::world_rank(int r) const {
  MPI_Group mine, world;
  check(MPI_Comm_group(h_->comm, &mine), "MPI_Comm_group");
  check(MPI_Comm_group(MPI_COMM_WORLD, &world), "MPI_Comm_group");
  int out = MPI_UNDEFINED;
  MPI_Group_translate_ranks(mine, 1, &r, world, &out);
  MPI_Group_free(&mine);
  MPI_Group_free(&world);
  return out;
}

Comm Comm::dup(const Step& step) const {
  auto h = std::make_unique<Handle>();
  MPI_Request r = MPI_REQUEST_NULL;
  check(MPI_Comm_idup(h_->comm, &h->comm, &r), "MPI_Comm_idup");
  wait_one(r, step, deadline_of(step));
  h->owned = true;
  return Comm(std::move(h));
}

Comm Comm::split(int color, int key, const Step& step) const {
  barrier(step);  // every member is here: the split needs only ranks just seen alive
  auto h = std::make_unique<Handle>();
  detail::run_watched(step, [&] {
    check(MPI_Comm_split(h_->comm, color < 0 ? MPI_UNDEFINED : color, key, &h->comm), "MPI_Comm_split");
  });
  h->owned = h->comm != MPI_COMM_NULL;
  return Comm(std::move(h));
}

Comm Comm::split_shared(const Step& step) const {
  barrier(step);
  auto h = std::make_unique<Handle>();
  detail::run_watched(step, [&] {
    check(MPI_Comm_split_type(h_->comm, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &h->comm), "MPI_Comm_split_type");
  });
  h->owned = h->comm != MPI_COMM_NULL;
  return Comm(std::move(h));
}

std::vector<std::string> Comm::allgather(const std::string& mine, const Step& step) const {
  const double deadline = deadline_of(step);
  int n = record_size(mine, "allgather");
  std::vector<int> sizes(static_cast<std::size_t>(size_));
  MPI_Request r = MPI_REQUEST_NULL;
  check(MPI_Iallgather(&n, 1, MPI_INT, sizes.data(), 1, MPI_INT, h_->comm, &r), "MPI_Iallgather");
  wait_one(r, step, deadline);
  const std::vector<int> displs = displacements(sizes, "allgather");
  std::string all(static_cast<std::size_t>(displs.back() + sizes.back()), '\0');
  check(MPI_Iallgatherv(mine.data(), n, MPI_BYTE, all.data(), sizes.data(), displs.data(), MPI_BYTE, h_->comm, &r),
        "MPI_Iallgatherv");
  wait_one(r, step, deadline);
  return split_parts(all, sizes, displs);
}

void Comm::broadcast(std::string& data, int root, const Step& step) const {
  const double deadline = deadline_of(step);
  unsigned long long n = data.size();
  MPI_Request r = MPI_REQUEST_NULL;
  check(MPI_Ibcast(&n, 1, MPI_UNSIGNED_LONG_LONG, root, h_->comm, &r), "MPI_Ibcast (size)");
  wait_one(r, step, deadline);
  data.resize(static_cast<std::size_t>(n));
  std::vector<MPI_Request> reqs;
  for (std::size_t at = 0; at < data.size(); at += kChunkBytes) {
    reqs.push_back(MPI_REQUEST_NULL);
    check(MPI_Ibcast(data.data() + at, chunk_count(data.size(), at), MPI_BYTE, root, h_->comm, &reqs.back()),
          "MPI_Ibcast");
  }
  wait_all(reqs.data(), static_cast<int>(reqs.size()), step, deadline);
}

std::vector<std::string> Comm::gather(const std::string& mine, int root, const Step& step) const {
  const double deadline = deadline_of(step);
  int n = record_size(mine, "gather");
  std::vector<int> sizes(static_cast<std::size_t>(size_));
  MPI_Request r = MPI_REQUEST_NULL;
  check(MPI_Igather(&n, 1, MPI_INT, sizes.data(), 1, MPI_INT, root, h_->comm, &r), "MPI_Igather");
  wait_one(r, step, deadline);
  std::vector<int> displs(sizes.size(), 0);
  if (rank_ == root) displs = displacements(sizes, "gather");
  std::string all(rank_ == root ? static_cast<std::size_t>(displs.back() + sizes.back()) : 0, '\0');
  check(MPI_Igatherv(mine.data(), n, MPI_BYTE, all.data(), sizes.data(), displs.data(), MPI_BYTE, root, h_->comm, &r),
        "MPI_Igatherv");
  wait_one(r, step, deadline);
  if (rank_ != root) return {};
  return split_parts(all, sizes, displs);
}

void Comm::barrier(const Step& step) const {
  MPI_Request r = MPI_REQUEST_NULL;
  check(MPI_Ibarrier(h_->comm, &r), "MPI_Ibarrier");
  wait_one(r, step, deadline_of(step));
}

void Comm::allreduce_max(std::vector<std::uint64_t>& values, const Step& step) const {
  MPI_Request r = MPI_REQUEST_NULL;
  check(
      MPI_Iallreduce(MPI_IN_PLACE, values.data(), static_cast<int>(values.size()), MPI_UINT64_T, MPI_MAX, h_->comm, &r),
      "MPI_Iallreduce");
  wait_one(r, step, deadline_of(step));
}

void Comm::send_to(const std::vector<int>& dsts, int tag, const std::string& data, const Step& step) const {
  if (dsts.empty()) return;
  const double deadline = deadline_of(step);
  const unsigned long long n = data.size();
  std::vector<MPI_Request> reqs;
  reqs.reserve(dsts.size() * (1 + chunks_of(data.size())));
  for (int d : dsts) {
    reqs.push_back(MPI_REQUEST_NULL);
    check(MPI_Isend(&n, 1, MPI_UNSIGNED_LONG_LONG, d, tag, h_->comm, &reqs.back()), "MPI_Isend (size)");
    for (std::size_t at = 0; at < data.size(); at += kChunkBytes) {
      reqs.push_back(MPI_REQUEST_NULL);
      check(MPI_Isend(data.data() + at, chunk_count(data.size(), at), MPI_BYTE, d, tag + 1, h_->comm, &reqs.back()),
            "MPI_Isend");
    }
  }
  wait_all(reqs.data(), static_cast<int>(reqs.size()), step, deadline);
}

std::vector<std::string> Comm::recv_from(const std::vector<int>& srcs, int tag, const Step& step) const {
  std::vector<std::string> out(srcs.size());
  if (srcs.empty()) return out;
  const double deadline = deadline_of(step);
  std::vector<unsigned long long> sizes(srcs.size(), 0);
  std::vector<MPI_Request> reqs(srcs.size(), MPI_REQUEST_NULL);
  for (std::size_t i = 0; i < srcs.size(); ++i)
    check(MPI_Irecv(&sizes[i], 1, MPI_UNSIGNED_LONG_LONG, srcs[i], tag, h_->comm, &reqs[i]), "MPI_Irecv (size)");
  wait_all(reqs.data(), static_cast<int>(reqs.size()), step, deadline);
  reqs.clear();
  for (std::size_t i = 0; i < srcs.size(); ++i) {
    out[i].resize(static_cast<std::size_t>(sizes[i]));
    for (std::size_t at = 0; at < out[i].size(); at += kChunkBytes) {
      reqs.push_back(MPI_REQUEST_NULL);
      check(MPI_Irecv(out[i].data() + at, chunk_count(out[i].size(), at), MPI_BYTE, srcs[i], tag + 1, h_->comm,
                      &reqs.back()),
            "MPI_Irecv");
    }
  }
  wait_all(reqs.data(), static_cast<int>(reqs.size()), step, deadline);
  return out;
}

std::string Comm::sendrecv(const std::string& data, int dst, int src, int tag, const Step& step) const {
  const double deadline = deadline_of(step);
  const unsigned long long n = data.size();
  unsigned long long m = 0;
  std::vector<MPI_Request> sends;
  MPI_Request size_in = MPI_REQUEST_NULL;
  check(MPI_Irecv(&m, 1, MPI_UNSIGNED_LONG_LONG, src, tag, h_->comm, &size_in), "MPI_Irecv (size)");
  sends.push_back(MPI_REQUEST_NULL);
  check(MPI_Isend(&n, 1, MPI_UNSIGNED_LONG_LONG, dst, tag, h_->comm, &sends.back()), "MPI_Isend (size)");
  for (std::size_t at = 0; at < data.size(); at += kChunkBytes) {
    sends.push_back(MPI_REQUEST_NULL);
    check(MPI_Isend(data.data() + at, chunk_count(data.size(), at), MPI_BYTE, dst, tag + 1, h_->comm, &sends.back()),
          "MPI_Isend");
  }
  wait_one(size_in, step, deadline);
  std::string out(static_cast<std::size_t>(m), '\0');
  std::vector<MPI_Request> all = sends;
  for (std::size_t at = 0; at < out.size(); at += kChunkBytes) {
    all.push_back(MPI_REQUEST_NULL);
    check(MPI_Irecv(out.data() + at, chunk_count(out.size(), at), MPI_BYTE, src, tag + 1, h_->comm, &all.back()),
          "MPI_Irecv");
  }
  wait_all(all.data(), static_cast<int>(all.size()), step, deadline);
  return out;
}

void Comm::all_reduce_sum(float* data, std::size_t count, const Step& step) const {
  const double deadline = deadline_of(step);
  const std::size_t per = kChunkBytes / sizeof(float);
  for (std::size_t at = 0; at < count; at += per) {
    int n = static_cast<int>(std::min(count - at, per));
    MPI_Request r = MPI_REQUEST_NULL;
    check(MPI_Iallreduce(MPI_IN_PLACE, data + at, n, MPI_FLOAT, MPI_SUM, h_->comm, &r), "MPI_Iallreduce");
    wait_one(r, step, deadline);
  }
}

void Comm::all_gather(const void* in, void* out, std::size_t bytes, const Step& step) const {
  const double deadline = deadline_of(step);
  MPI_Request r = MPI_REQUEST_NULL;
  if (bytes <= kChunkBytes) {
    check(MPI_Iallgather(in, static_cast<int>(bytes), MPI_BYTE, out, static_cast<int>(bytes), MPI_BYTE, h_->comm, &r),
          "MPI_Iallgather");
    wait_one(r, step, deadline);
    return;
  }
  // Chunk by chunk through a staging buffer, then into each rank's slot.
  std::vector<char> stage(kChunkBytes * static_cast<std::size_t>(size_));
  auto* dst = static_cast<char*>(out);
  for (std::size_t at = 0; at < bytes; at += kChunkBytes) {
    const int n = chunk_count(bytes, at);
    check(MPI_Iallgather(static_cast<const char*>(in) + at, n, MPI_BYTE, stage.data(), n, MPI_BYTE, h_->comm, &r),
          "MPI_Iallgather");
    wait_one(r, step, deadline);
    for (int q = 0; q < size_; ++q)
      std::memcpy(dst + static_cast<std::size_t>(q) * bytes + at, stage.data() + static_cast<std::size_t>(q * n),
                  static_cast<std::size_t>(n));
  }
}

void Comm::broadcast(void* data, std::size_t bytes, int root, const Step& step) const {
  const double deadline = deadline_of(step);
  auto* p = static_cast<char*>(data);
  std::vector<MPI_Request> reqs;
  for (std::size_t at = 0; at < bytes; at += kChunkBytes) {
    reqs.push_back(MPI_REQUEST_NULL);
    check(MPI_Ibcast(p + at, chunk_count(bytes, at), MPI_BYTE, root, h_->comm, &reqs.back()), "MPI_Ibcast");
  }
  wait_all(reqs.data(), static_cast<int>(reqs.size()), step, deadline);
}

void Comm::send(int dst, int tag, const void* data, std::size_t bytes, const Step& step) const {
  const double deadline = deadline_of(step);
  auto* p = static_cast<const char*>(data);
  std::vector<MPI_Request> reqs;
  for (std::size_t at = 0; at < bytes; at += kChunkBytes) {
    reqs.push_back(MPI_REQUEST_NULL);
    check(MPI_Isend(p + at, chunk_count(bytes, at), MPI_BYTE, dst, tag, h_->comm, &reqs.back()), "MPI_Isend");
  }
  wait_all(reqs.data(), static_cast<int>(reqs.size()), step, deadline);
}

void Comm::recv(int src, int tag, void* data, std::size_t bytes, const Step& step) const {
  const double deadline = deadline_of(step);
  auto* p = static_cast<char*>(data);
  for (std::size_t at = 0; at < bytes; at += kChunkBytes) {
    const int n = chunk_count(bytes, at);
    MPI_Request r = MPI_REQUEST_NULL;
    MPI_Status st;
    check(MPI_Irecv(p + at, n, MPI_BYTE, src, tag, h_->comm, &r), "MPI_Irecv");
    wait_one(r, step, deadline, &st);
    int got = 0;
    MPI_Get_count(&st, MPI_BYTE, &got);
    if (got != n)
      throw CommError("receive expected " + std::to_string(n) + " bytes from rank " + std::to_string(src) + ", got " +
                      std::to_string(got) + ": the ranks disagree on the message size");
  }
}

}  // namespace npucache::mpi

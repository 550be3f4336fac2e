#include "mpi/comm.h"

#include <npucache/error.h>
#include <npucache/mpi.h>

#include "mpi/check.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstring>
#include <thread>

namespace npucache::mpi {
namespace {

constexpr int kArriveTag = 0x4e50;  // "NP": arrival messages
constexpr int kVerdictTag = 0x4e51;

int chunk_count(std::size_t bytes, std::size_t at) { return static_cast<int>(std::min(kChunkBytes, bytes - at)); }

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

Comm Comm::split(int color, int key) const {
  auto h = std::make_unique<Handle>();
  check(MPI_Comm_split(h_->comm, color < 0 ? MPI_UNDEFINED : color, key, &h->comm), "MPI_Comm_split");
  h->owned = h->comm != MPI_COMM_NULL;
  return Comm(std::move(h));
}

std::vector<std::string> Comm::allgather(const std::string& mine) const {
  int n = record_size(mine, "allgather");
  std::vector<int> sizes(static_cast<std::size_t>(size_));
  check(MPI_Allgather(&n, 1, MPI_INT, sizes.data(), 1, MPI_INT, h_->comm), "MPI_Allgather");
  const std::vector<int> displs = displacements(sizes, "allgather");
  std::string all(static_cast<std::size_t>(displs.back() + sizes.back()), '\0');
  check(MPI_Allgatherv(mine.data(), n, MPI_BYTE, all.data(), sizes.data(), displs.data(), MPI_BYTE, h_->comm),
        "MPI_Allgatherv");
  return split_parts(all, sizes, displs);
}

void Comm::broadcast(std::string& data, int root) const {
  unsigned long long n = data.size();
  check(MPI_Bcast(&n, 1, MPI_UNSIGNED_LONG_LONG, root, h_->comm), "MPI_Bcast (size)");
  data.resize(static_cast<std::size_t>(n));
  broadcast(data.data(), data.size(), root);
}

std::vector<std::string> Comm::gather(const std::string& mine, int root) const {
  int n = record_size(mine, "gather");
  std::vector<int> sizes(static_cast<std::size_t>(size_));
  check(MPI_Gather(&n, 1, MPI_INT, sizes.data(), 1, MPI_INT, root, h_->comm), "MPI_Gather");
  std::vector<int> displs(sizes.size(), 0);
  if (rank_ == root) displs = displacements(sizes, "gather");
  std::string all(rank_ == root ? static_cast<std::size_t>(displs.back() + sizes.back()) : 0, '\0');
  check(MPI_Gatherv(mine.data(), n, MPI_BYTE, all.data(), sizes.data(), displs.data(), MPI_BYTE, root, h_->comm),
        "MPI_Gatherv");
  if (rank_ != root) return {};
  return split_parts(all, sizes, displs);
}

void Comm::barrier() const { check(MPI_Barrier(h_->comm), "MPI_Barrier"); }

void Comm::arrive(int tag, double timeout_s, const std::string& what) const {
  if (size_ == 1) return;
  const double deadline = MPI_Wtime() + timeout_s;
  auto poll = [&](MPI_Request& r) {
    int done = 0;
    while (true) {
      check(MPI_Test(&r, &done, MPI_STATUS_IGNORE), "MPI_Test");
      if (done || MPI_Wtime() > deadline) return done != 0;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  };
  if (rank_ == 0) {
    std::vector<int> got(static_cast<std::size_t>(size_), -1);
    std::vector<MPI_Request> reqs(static_cast<std::size_t>(size_), MPI_REQUEST_NULL);
    for (int r = 1; r < size_; ++r)
      check(MPI_Irecv(&got[static_cast<std::size_t>(r)], 1, MPI_INT, r, kArriveTag, h_->comm,
                      &reqs[static_cast<std::size_t>(r)]),
            "MPI_Irecv");
    std::vector<int> missing;
    for (int r = 1; r < size_; ++r) {
      MPI_Request& q = reqs[static_cast<std::size_t>(r)];
      if (!poll(q) || got[static_cast<std::size_t>(r)] != tag) {
        if (q != MPI_REQUEST_NULL) {
          MPI_Cancel(&q);
          MPI_Request_free(&q);
        }
        missing.push_back(r);
      }
    }
    int verdict = missing.empty() ? 1 : 0;
    for (int r = 1; r < size_; ++r)
      if (std::find(missing.begin(), missing.end(), r) == missing.end())
        check(MPI_Send(&verdict, 1, MPI_INT, r, kVerdictTag, h_->comm), "MPI_Send");
    if (!missing.empty()) {
      std::string list;
      for (int r : missing) list += (list.empty() ? "" : ", ") + std::to_string(r);
      throw CommError(what + ": rank(s) " + list + " did not arrive within " + std::to_string(timeout_s) +
                      " s (crashed, or never called it); giving up instead of hanging");
    }
    return;
  }
  int mine = tag, verdict = 0;
  MPI_Request s = MPI_REQUEST_NULL, r = MPI_REQUEST_NULL;
  check(MPI_Isend(&mine, 1, MPI_INT, 0, kArriveTag, h_->comm, &s), "MPI_Isend");
  check(MPI_Irecv(&verdict, 1, MPI_INT, 0, kVerdictTag, h_->comm, &r), "MPI_Irecv");
  if (!poll(r)) {
    MPI_Cancel(&r);
    MPI_Request_free(&r);
    MPI_Request_free(&s);
    throw CommError(what + ": no answer from rank 0 within " + std::to_string(timeout_s) +
                    " s (another rank did not arrive or rank 0 failed); giving up instead of hanging");
  }
  MPI_Wait(&s, MPI_STATUS_IGNORE);
  if (verdict != 1)
    throw CommError(what + ": rank 0 reports that some rank(s) did not arrive within " + std::to_string(timeout_s) +
                    " s; giving up instead of hanging");
}

void Comm::all_reduce_sum(float* data, std::size_t count) const {
  const std::size_t per = kChunkBytes / sizeof(float);
  for (std::size_t at = 0; at < count; at += per) {
    int n = static_cast<int>(std::min(count - at, per));
    check(MPI_Allreduce(MPI_IN_PLACE, data + at, n, MPI_FLOAT, MPI_SUM, h_->comm), "MPI_Allreduce");
  }
}

void Comm::all_gather(const void* in, void* out, std::size_t bytes) const {
  if (bytes <= kChunkBytes) {
    check(MPI_Allgather(in, static_cast<int>(bytes), MPI_BYTE, out, static_cast<int>(bytes), MPI_BYTE, h_->comm),
          "MPI_Allgather");
    return;
  }
  // Chunk by chunk through a staging buffer, then into each rank's slot.
  std::vector<char> stage(kChunkBytes * static_cast<std::size_t>(size_));
  auto* dst = static_cast<char*>(out);
  for (std::size_t at = 0; at < bytes; at += kChunkBytes) {
    const int n = chunk_count(bytes, at);
    check(MPI_Allgather(static_cast<const char*>(in) + at, n, MPI_BYTE, stage.data(), n, MPI_BYTE, h_->comm),
          "MPI_Allgather");
    for (int r = 0; r < size_; ++r)
      std::memcpy(dst + static_cast<std::size_t>(r) * bytes + at, stage.data() + static_cast<std::size_t>(r * n),
                  static_cast<std::size_t>(n));
  }
}

void Comm::broadcast(void* data, std::size_t bytes, int root) const {
  auto* p = static_cast<char*>(data);
  for (std::size_t at = 0; at < bytes; at += kChunkBytes)
    check(MPI_Bcast(p + at, chunk_count(bytes, at), MPI_BYTE, root, h_->comm), "MPI_Bcast");
}

void Comm::send(int dst, int tag, const void* data, std::size_t bytes) const {
  auto* p = static_cast<const char*>(data);
  for (std::size_t at = 0; at < bytes; at += kChunkBytes)
    check(MPI_Send(p + at, chunk_count(bytes, at), MPI_BYTE, dst, tag, h_->comm), "MPI_Send");
}

void Comm::recv(int src, int tag, void* data, std::size_t bytes) const {
  auto* p = static_cast<char*>(data);
  for (std::size_t at = 0; at < bytes; at += kChunkBytes) {
    const int n = chunk_count(bytes, at);
    MPI_Status st;
    check(MPI_Recv(p + at, n, MPI_BYTE, src, tag, h_->comm, &st), "MPI_Recv");
    int got = 0;
    MPI_Get_count(&st, MPI_BYTE, &got);
    if (got != n)
      throw CommError("receive expected " + std::to_string(n) + " bytes from rank " + std::to_string(src) + ", got " +
                      std::to_string(got) + ": the ranks disagree on the message size");
  }
}

}  // namespace npucache::mpi

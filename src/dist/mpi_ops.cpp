#include "dist/mpi_ops.h"

#include <npucache/error.h>
#include <npucache/mpi.h>

#include <mpi.h>

#include "runtime/mpi_check.h"

#include <algorithm>
#include <climits>
#include <thread>

namespace npucache::dist {
namespace {

using mpi::check;

constexpr std::size_t kChunk = std::size_t{256} << 20;  // well below MPI's int count limit
constexpr int kArriveTag = 0x4e50;                      // "NP": arrival messages
constexpr int kVerdictTag = 0x4e51;

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
  if (mine.size() > static_cast<std::size_t>(INT_MAX)) throw CommError("allgather: record too large");
  int n = static_cast<int>(mine.size());
  std::vector<int> sizes(static_cast<std::size_t>(size_));
  check(MPI_Allgather(&n, 1, MPI_INT, sizes.data(), 1, MPI_INT, h_->comm), "MPI_Allgather");
  std::vector<int> displs(sizes.size(), 0);
  long long total = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    displs[i] = static_cast<int>(total);
    total += sizes[i];
  }
  if (total > INT_MAX) throw CommError("allgather: records too large in total");
  std::string all(static_cast<std::size_t>(total), '\0');
  check(MPI_Allgatherv(mine.data(), n, MPI_BYTE, all.data(), sizes.data(), displs.data(), MPI_BYTE, h_->comm),
        "MPI_Allgatherv");
  std::vector<std::string> out;
  for (std::size_t i = 0; i < sizes.size(); ++i)
    out.push_back(all.substr(static_cast<std::size_t>(displs[i]), static_cast<std::size_t>(sizes[i])));
  return out;
}

void Comm::broadcast(std::string& data, int root) const {
  unsigned long long n = data.size();
  check(MPI_Bcast(&n, 1, MPI_UNSIGNED_LONG_LONG, root, h_->comm), "MPI_Bcast (size)");
  data.resize(static_cast<std::size_t>(n));
  for (std::size_t at = 0; at < data.size(); at += kChunk) {
    int len = static_cast<int>(std::min(kChunk, data.size() - at));
    check(MPI_Bcast(data.data() + at, len, MPI_BYTE, root, h_->comm), "MPI_Bcast");
  }
}

std::vector<std::string> Comm::gather(const std::string& mine, int root) const {
  int n = static_cast<int>(mine.size());
  std::vector<int> sizes(static_cast<std::size_t>(size_));
  check(MPI_Gather(&n, 1, MPI_INT, sizes.data(), 1, MPI_INT, root, h_->comm), "MPI_Gather");
  std::vector<int> displs(sizes.size(), 0);
  long long total = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    displs[i] = static_cast<int>(total);
    total += sizes[i];
  }
  std::string all(rank_ == root ? static_cast<std::size_t>(total) : 0, '\0');
  check(MPI_Gatherv(mine.data(), n, MPI_BYTE, all.data(), sizes.data(), displs.data(), MPI_BYTE, root, h_->comm),
        "MPI_Gatherv");
  std::vector<std::string> out;
  if (rank_ == root)
    for (std::size_t i = 0; i < sizes.size(); ++i)
      out.push_back(all.substr(static_cast<std::size_t>(displs[i]), static_cast<std::size_t>(sizes[i])));
  return out;
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
      check(MPI_Irecv(&got[static_cast<std::size_t>(r)], 1, MPI_INT, r, kArriveTag, h_->comm, &reqs[static_cast<std::size_t>(r)]),
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

}  // namespace npucache::dist

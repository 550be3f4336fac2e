// A coordinator transport for tests (coord/transport.h): it wraps the MPI
// transport and injects one fault on one rank.
//   slow     the rank sleeps `seconds` before the first operation whose
//            step name contains `step`
//   dead     the rank never arrives at that operation (it sleeps until the
//            job is ended)
//   corrupt  the bytes the rank receives in that operation are damaged
//            (one byte in the middle of each message flipped)
//   fail     when the rank's own work in `phase` begins, `action` runs (it
//            throws the exception the test chose)
//   act      the same, for an action that does not throw (a test planting a
//            file in a store just before the writer commits)
// `method` limits the fault to one cached method ("" any). Installed with
// coord::install_transport(std::make_shared<FaultTransport>(fault)).
#pragma once

#include "coord/transport.h"

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace npucache::testing_support {

struct Fault {
  enum class Kind { slow, dead, corrupt, fail, act };
  Kind kind = Kind::fail;
  int rank = -1;
  std::string step;  // slow, dead, corrupt
  double seconds = 0;
  coord::Phase phase = coord::Phase::arrival;  // fail, act
  std::function<void()> action;
  std::string method;
};

class FaultTransport final : public coord::Transport {
 public:
  FaultTransport(std::shared_ptr<const coord::Transport> inner, Fault fault)
      : inner_(std::move(inner)), fault_(std::move(fault)) {}

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  void allreduce_max(std::vector<std::uint64_t>& values, const mpi::Step& step) const override {
    before(step);
    inner_->allreduce_max(values, step);
  }
  std::vector<std::string> allgather(const std::string& mine, const mpi::Step& step) const override {
    before(step);
    return damaged(inner_->allgather(mine, step), step);
  }
  void send_to(const std::vector<int>& dsts, int tag, const std::string& data, const mpi::Step& step) const override {
    before(step);
    inner_->send_to(dsts, tag, data, step);
  }
  std::vector<std::string> recv_from(const std::vector<int>& srcs, int tag, const mpi::Step& step) const override {
    before(step);
    return damaged(inner_->recv_from(srcs, tag, step), step);
  }
  std::string sendrecv(const std::string& data, int dst, int src, int tag, const mpi::Step& step) const override {
    before(step);
    return damaged({inner_->sendrecv(data, dst, src, tag, step)}, step)[0];
  }
  void local_work(coord::Phase phase, const std::string& method) const override {
    if (!mine() || (fault_.kind != Fault::Kind::fail && fault_.kind != Fault::Kind::act) || phase != fault_.phase ||
        !of_method(method))
      return;
    fired_ = true;
    if (fault_.action) fault_.action();
  }

  // Whether the fault happened.
  bool fired() const { return fired_; }

 private:
  bool mine() const { return inner_->rank() == fault_.rank; }
  bool of_method(const std::string& method) const { return fault_.method.empty() || fault_.method == method; }
  bool matches(const mpi::Step& step, Fault::Kind kind) const {
    return mine() && fault_.kind == kind && step.name.find(fault_.step) != std::string::npos &&
           (fault_.method.empty() || step.name.find("cache_compile of " + fault_.method + ":") == 0);
  }
  void before(const mpi::Step& step) const {
    if (matches(step, Fault::Kind::dead)) {
      fired_ = true;
      std::this_thread::sleep_for(std::chrono::minutes(10));  // the job is ended first
    }
    if (matches(step, Fault::Kind::slow) && !fired_.exchange(true))
      std::this_thread::sleep_for(std::chrono::duration<double>(fault_.seconds));
  }
  std::vector<std::string> damaged(std::vector<std::string> got, const mpi::Step& step) const {
    if (!matches(step, Fault::Kind::corrupt)) return got;
    for (auto& s : got)
      if (!s.empty()) {
        s[s.size() / 2] = static_cast<char>(s[s.size() / 2] ^ 0x5a);
        fired_ = true;
      }
    return got;
  }

  std::shared_ptr<const coord::Transport> inner_;
  Fault fault_;
  mutable std::atomic<bool> fired_{false};
};

}  // namespace npucache::testing_support

#include "coord/reports.h"

#include <npucache/coordinator.h>

#include "process/context.h"

#include <algorithm>
#include <mutex>
#include <vector>

namespace npucache {
namespace {

// This process's reports, in call order: a service of the process context.
struct Reports {
  std::mutex mu;
  std::vector<MethodReport> methods;
  std::vector<std::uint64_t> tickets;  // of each of `methods`
  std::uint64_t next_ticket = 0;
  std::vector<dist::StepReport> steps;
};

Reports& registry() { return process::Context::current().get<Reports>(); }

}  // namespace

std::uint64_t coord::add_report(const MethodReport& r) {
  Reports& all = registry();
  std::lock_guard lock(all.mu);
  all.methods.push_back(r);
  all.tickets.push_back(all.next_ticket);
  return all.next_ticket++;
}

void coord::amend_report(std::uint64_t ticket, const MethodReport& r) {
  Reports& all = registry();
  std::lock_guard lock(all.mu);
  // Tickets ascend: the record is found by a binary search, or is gone.
  const auto it = std::lower_bound(all.tickets.begin(), all.tickets.end(), ticket);
  if (it != all.tickets.end() && *it == ticket) all.methods[static_cast<std::size_t>(it - all.tickets.begin())] = r;
}

void coord::add_step_report(const dist::StepReport& r) {
  Reports& all = registry();
  std::lock_guard lock(all.mu);
  all.steps.push_back(r);
}

std::vector<dist::StepReport> dist::step_reports() {
  Reports& all = registry();
  std::lock_guard lock(all.mu);
  return all.steps;
}

std::vector<MethodReport> dist::reports() {
  Reports& all = registry();
  std::lock_guard lock(all.mu);
  return all.methods;
}

void dist::clear_reports() {
  Reports& all = registry();
  std::lock_guard lock(all.mu);
  all.methods.clear();
  all.tickets.clear();
  all.steps.clear();
}

}  // namespace npucache

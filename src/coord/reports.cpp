#include "coord/reports.h"

#include <npucache/coordinator.h>

#include "process/context.h"

#include <mutex>
#include <vector>

namespace npucache {
namespace {

// This process's reports, in call order: a service of the process context.
struct Reports {
  std::mutex mu;
  std::vector<MethodReport> methods;
  std::vector<dist::StepReport> steps;
};

Reports& registry() { return process::Context::current().get<Reports>(); }

}  // namespace

void coord::add_report(const MethodReport& r) {
  Reports& all = registry();
  std::lock_guard lock(all.mu);
  all.methods.push_back(r);
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
  all.steps.clear();
}

}  // namespace npucache

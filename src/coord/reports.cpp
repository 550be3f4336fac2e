#include "coord/reports.h"

#include <npucache/coordinator.h>

#include <mutex>
#include <vector>

namespace npucache {
namespace {

std::mutex g_mu;
std::vector<MethodReport> g_reports;
std::vector<dist::StepReport> g_steps;

}  // namespace

void coord::add_report(const MethodReport& r) {
  std::lock_guard lock(g_mu);
  g_reports.push_back(r);
}

void coord::add_step_report(const dist::StepReport& r) {
  std::lock_guard lock(g_mu);
  g_steps.push_back(r);
}

std::vector<dist::StepReport> dist::step_reports() {
  std::lock_guard lock(g_mu);
  return g_steps;
}

std::vector<MethodReport> dist::reports() {
  std::lock_guard lock(g_mu);
  return g_reports;
}

void dist::clear_reports() {
  std::lock_guard lock(g_mu);
  g_reports.clear();
  g_steps.clear();
}

}  // namespace npucache

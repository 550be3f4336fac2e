#include <npucache/device.h>
#include <npucache/error.h>

#include "runtime/allocator.h"
#include "runtime/stream.h"

#include <cstdlib>
#include <string>

namespace npucache {
namespace {

std::size_t parse_bytes(const char* text, const char* var) {
  std::string s(text);
  std::size_t mult = 1;
  if (!s.empty()) {
    char u = static_cast<char>(std::toupper(static_cast<unsigned char>(s.back())));
    if (u == 'K' || u == 'M' || u == 'G') {
      mult = u == 'K' ? (1u << 10) : u == 'M' ? (1u << 20) : (1u << 30);
      s.pop_back();
    }
  }
  try {
    std::size_t pos = 0;
    unsigned long long v = std::stoull(s, &pos);
    if (pos != s.size() || v == 0) throw std::invalid_argument(s);
    return static_cast<std::size_t>(v) * mult;
  } catch (const std::exception&) {
    throw ConfigError(std::string(var) + "='" + text +
                      "' is not a positive size; use bytes or a K/M/G suffix, e.g. 4G");
  }
}

int parse_positive_int(const char* text, const char* var) {
  try {
    std::size_t pos = 0;
    int v = std::stoi(text, &pos);
    if (pos != std::string(text).size() || v <= 0) throw std::invalid_argument(text);
    return v;
  } catch (const std::exception&) {
    throw ConfigError(std::string(var) + "='" + text + "' must be a positive integer");
  }
}

thread_local int t_current_device = 0;
std::mutex g_platform_mu;
// Never destroyed: a thread may still run programs while another runs
// exit().
std::unique_ptr<Platform>& g_platform = *new std::unique_ptr<Platform>();

}  // namespace

PlatformConfig PlatformConfig::from_env() {
  PlatformConfig c;
  if (const char* v = std::getenv("NPUCACHE_SIM_DEVICES"))
    c.num_devices = parse_positive_int(v, "NPUCACHE_SIM_DEVICES");
  if (const char* v = std::getenv("NPUCACHE_SIM_DEVICE_MEMORY"))
    c.memory_capacity = parse_bytes(v, "NPUCACHE_SIM_DEVICE_MEMORY");
  if (const char* v = std::getenv("NPUCACHE_SIM_RUNTIME_VERSION"); v && *v) c.runtime_version = v;
  auto microseconds = [](const char* var, double& into) {
    const char* v = std::getenv(var);
    if (!v) return;
    try {
      std::size_t used = 0;
      into = std::stod(v, &used);
      if (used != std::string(v).size()) throw std::invalid_argument(v);
    } catch (const std::exception&) {
      throw ConfigError(std::string(var) + "='" + v + "' is not a number");
    }
    if (!(into >= 0) || into > 1e9) throw ConfigError(std::string(var) + " must be a number of microseconds >= 0");
  };
  microseconds("NPUCACHE_SIM_LAUNCH_LATENCY_US", c.launch_latency_us);
  microseconds("NPUCACHE_SIM_CAPTURE_US_PER_TASK", c.capture_us_per_task);
  microseconds("NPUCACHE_SIM_INSTANTIATE_US_PER_TASK", c.instantiate_us_per_task);
  return c;
}

Device::Device(int id, DeviceProperties props, double launch_latency_us)
    : id_(id),
      props_(std::move(props)),
      launch_latency_us_(launch_latency_us),
      allocator_(std::make_shared<runtime::CachingAllocator>(id, props_.name, props_.memory_capacity)) {}

Device::~Device() {
  std::lock_guard lock(mu_);
  streams_.clear();
}

runtime::BlockPtr Device::allocate(std::size_t bytes) { return allocator_->allocate(bytes); }
runtime::MemoryStats Device::memory_stats() const { return allocator_->stats(); }
void Device::empty_cache() { allocator_->empty_cache(); }

runtime::Stream& Device::default_stream() {
  std::lock_guard lock(mu_);
  if (streams_.empty()) streams_.push_back(std::make_unique<runtime::Stream>(*this, 0));
  return *streams_.front();
}

runtime::Stream& Device::create_stream() {
  default_stream();
  std::lock_guard lock(mu_);
  streams_.push_back(std::make_unique<runtime::Stream>(*this, static_cast<int>(streams_.size())));
  return *streams_.back();
}

void Device::synchronize() {
  std::vector<runtime::Stream*> streams;
  {
    std::lock_guard lock(mu_);
    for (auto& s : streams_) streams.push_back(s.get());
  }
  for (runtime::Stream* s : streams) s->synchronize();
}

Platform::Platform(PlatformConfig config) : config_(std::move(config)) {
  if (config_.num_devices <= 0) throw ConfigError("the platform needs at least one device");
  devices_.resize(static_cast<std::size_t>(config_.num_devices));
}

Platform& Platform::get() {
  std::lock_guard lock(g_platform_mu);
  if (!g_platform) g_platform.reset(new Platform(PlatformConfig::from_env()));
  return *g_platform;
}

void Platform::configure(const PlatformConfig& config) {
  std::lock_guard lock(g_platform_mu);
  if (g_platform) {
    std::lock_guard plock(g_platform->mu_);
    for (auto& d : g_platform->devices_)
      if (d) throw DeviceError("Platform::configure must be called before any device is used");
  }
  g_platform.reset(new Platform(config));
}

Device& Platform::device(int id) {
  if (id < 0 || id >= config_.num_devices)
    throw DeviceError("invalid device id " + std::to_string(id) + ": this node has " +
                      std::to_string(config_.num_devices) + " devices, ids 0.." +
                      std::to_string(config_.num_devices - 1));
  std::lock_guard lock(mu_);
  auto& d = devices_[static_cast<std::size_t>(id)];
  if (!d) {
    DeviceProperties p{"simnpu-v1", config_.memory_capacity, config_.compute_cores, config_.runtime_version};
    d = std::make_unique<Device>(id, std::move(p), config_.launch_latency_us);
  }
  return *d;
}

int current_device() { return t_current_device; }

void set_current_device(int id) {
  Platform::get().device(id);  // validates
  t_current_device = id;
}

}  // namespace npucache

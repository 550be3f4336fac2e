// The simulated NPU node: devices, their properties, memory and streams.
//
// A node has N devices (default 8). Each device owns a caching allocator
// with a capacity limit and a set of streams. Device properties (name,
// memory capacity, compute cores, runtime version) identify the "hardware"
// and later feed cache keys.
//
// Configuration comes from PlatformConfig, or from the environment when the
// platform is first used: NPUCACHE_SIM_DEVICES, NPUCACHE_SIM_DEVICE_MEMORY
// (bytes, or with a K/M/G suffix), NPUCACHE_SIM_RUNTIME_VERSION,
// NPUCACHE_SIM_LAUNCH_LATENCY_US (an optional modelled host-side launch
// latency, default 0: only the real cost of a launch is paid), and the
// capture-cost model, off by default: NPUCACHE_SIM_CAPTURE_US_PER_TASK (what
// recording one task of a captured graph costs; on hardware a capture is
// seconds: vllm-ascend reports about 3.3 s per captured shape, so 3300 us
// per task models a 1,000-task decode graph) and
// NPUCACHE_SIM_INSTANTIATE_US_PER_TASK (what making a replayable graph from
// recorded or restored tasks costs per task; Foundry restores templates
// 17-22x faster than it captures, so 165 us goes with 3300).
//
// Thread safety: Platform and Device are safe to use from several threads.
#pragma once

#include <npucache/export.h>

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <npucache/runtime/memory.h>

namespace npucache {

namespace runtime {
class Stream;
class CachingAllocator;
}  // namespace runtime

struct DeviceProperties {
  std::string name;             // "simnpu-v1"
  std::size_t memory_capacity;  // bytes
  int compute_cores;
  std::string runtime_version;  // "simnpu-runtime 1.0.0"
};

struct NPUCACHE_API PlatformConfig {
  int num_devices = 8;
  std::size_t memory_capacity = std::size_t{4} << 30;
  int compute_cores = 8;
  std::string runtime_version = "1.0.0";
  double launch_latency_us = 0.0;
  double capture_us_per_task = 0.0;
  double instantiate_us_per_task = 0.0;
  // Defaults overridden by the NPUCACHE_SIM_* environment variables.
  static PlatformConfig from_env();
};

class NPUCACHE_API Device {
 public:
  Device(int id, DeviceProperties props, double launch_latency_us);
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  int id() const { return id_; }
  const DeviceProperties& properties() const { return props_; }

  // Allocates `bytes` of device memory. Throws OutOfMemoryError naming the
  // device, the request and the free memory when the capacity is exceeded.
  runtime::BlockPtr allocate(std::size_t bytes);
  runtime::MemoryStats memory_stats() const;
  // Returns cached free blocks to the host.
  void empty_cache();

  // The stream used when none is given (created on first use), and a new
  // stream on this device that lives as long as the device. The streams
  // are the simulated runtime's own (internal to the library).
  NPUCACHE_LOCAL runtime::Stream& default_stream();
  NPUCACHE_LOCAL runtime::Stream& create_stream();
  // Waits for every stream of this device.
  void synchronize();
  double launch_latency_us() const { return launch_latency_us_; }

 private:
  int id_;
  DeviceProperties props_;
  double launch_latency_us_;
  std::shared_ptr<runtime::CachingAllocator> allocator_;
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<runtime::Stream>> streams_;
};

class NPUCACHE_API Platform {
 public:
  // The process-wide platform, configured from the environment on first use
  // unless configure() was called before.
  static Platform& get();
  // Replaces the configuration. Throws DeviceError once devices were used.
  static void configure(const PlatformConfig& config);

  int device_count() const { return config_.num_devices; }
  const PlatformConfig& config() const { return config_; }
  // Throws DeviceError for an invalid id ("invalid device id 9: this node
  // has 8 devices, ids 0..7").
  Device& device(int id);

 private:
  NPUCACHE_LOCAL explicit Platform(PlatformConfig config);
  PlatformConfig config_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Device>> devices_;
};

// The calling thread's current device (default 0).
NPUCACHE_API int current_device();
NPUCACHE_API void set_current_device(int id);

// Sets the current device for a scope.
class DeviceGuard {
 public:
  explicit DeviceGuard(int id) : previous_(current_device()) { set_current_device(id); }
  ~DeviceGuard() { set_current_device(previous_); }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_;
};

}  // namespace npucache

// The hccl backend's communicator: one HcclComm and one stream on one device. Host
// buffers are staged through device memory; the collective runs on the device.
#ifndef NPUGATHER_HCCL_HCCL_COMMUNICATOR_H_
#define NPUGATHER_HCCL_HCCL_COMMUNICATOR_H_

#include <stdint.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "../core/backend.h"
#include "../core/communicator.h"
#include "cann_library.h"
#include "device_claim.h"

namespace npg {
namespace hccl {

class HcclCommunicator final : public Communicator {
 public:
  // root_info is HCCL's own 4108 bytes; unused (may be null) when rank_table_path (a checked,
  // canonical path) is not empty.
  // Blocks in HcclCommInitRootInfo/HcclCommInitClusterInfo, which only HCCL_CONNECT_TIMEOUT
  // bounds (at least 120 s + 20 s, so a shorter config.timeout_ms cannot cut one attempt
  // short); retries HCCL_E_AGAIN/HCCL_E_UNAVAIL with back-off until config.timeout_ms elapses.
  static std::unique_ptr<HcclCommunicator> create(const CommConfig& config, const HcclRootInfo* root_info,
                                                  const std::string& rank_table_path);
  ~HcclCommunicator() override;

  int32_t rank() const override { return rank_; }
  int32_t size() const override { return size_; }
  const char* transport() const override { return "hccl"; }
  void all_gather_v(const npg_segment_t* segments, size_t segment_count, bool write_own, void* recv,
                    const uint64_t* counts_bytes, const uint64_t* displs_bytes) override;
  // Interruptible: the wait for the stream (when aclrtSynchronizeStreamWithTimeout exists),
  // polled every 100 ms. Not interruptible: an enqueue or a copy already inside CANN, and the
  // blocking aclrtSynchronizeStream of runtimes without the timeout variant (there only
  // HCCL_EXEC_TIMEOUT bounds a stuck collective, and the timeout is not enforced by us).
  void abort() noexcept override;
  void close() override;

 private:
  class DeviceBuffer;
  using Clock = std::chrono::steady_clock;

  HcclCommunicator(const CannApi& api, const CommConfig& config);
  void init_comm(const HcclRootInfo* root_info, const std::string& rank_table_path);
  void bind_device() const;
  void begin_call();
  void end_call() noexcept;
  void destroy_comm_locked() noexcept;
  std::string where() const;
  // Runs one collective that enqueue() puts on the stream, then waits for the stream.
  template <typename Enqueue>
  void run_collective(const char* op, Enqueue&& enqueue, std::vector<DeviceBuffer*> buffers,
                      Clock::time_point deadline);
  void wait_stream(const char* op, Clock::time_point deadline);
  void check_same_layout(const uint64_t* counts_bytes, Clock::time_point deadline);

  const CannApi& api_;
  int32_t rank_;
  int32_t size_;
  int32_t device_;
  int64_t timeout_ms_;
  DeviceClaim claim_;
  std::mutex mutex_;  // guards comm_, busy_, quarantine_
  HcclComm comm_ = nullptr;
  aclrtStream stream_ = nullptr;
  bool busy_ = false;
  std::atomic<bool> aborted_{false};
  std::string broken_;  // first failure that leaves the stream or the comm unusable
  // Device buffers a stream that did not finish may still touch; freed after the stream is gone.
  std::vector<void*> quarantine_;
};

}  // namespace hccl
}  // namespace npg

#endif  // NPUGATHER_HCCL_HCCL_COMMUNICATOR_H_

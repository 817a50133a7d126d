#include "hccl_communicator.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "../cann/cann_errors.h"
#include "../core/error.h"
#include "hccl_errors.h"
#include "hccl_timeouts.h"

namespace npg {
namespace hccl {
namespace {

constexpr int64_t kInitBackoffFirstMs = 100;
constexpr int64_t kInitBackoffMaxMs = 2000;
// How long HcclCommDestroy's HCCL_E_AGAIN ("an operation is in flight") is retried.
constexpr int64_t kDestroyAgainMs = 5000;
// CANN's error code for "the HCCP process of an earlier job still holds the device".
constexpr const char* kHccpBusy = "EJ0001";

int64_t ms_between(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(b - a).count();
}

class HcclCollectives final : public cann::DeviceCollectives {
 public:
  HcclCollectives(const HcclApi& api, HcclComm comm) : api_(api), comm_(comm) {}
  const char* all_gather_name() const override { return "HcclAllGather"; }
  uint64_t max_call_bytes() const override { return kHcclMaxCount; }  // UINT8 elements are bytes
  void all_gather(const char* op, void* send, void* recv, uint64_t bytes, aclrtStream stream,
                  const std::string& where) override {
    HcclResult hr = api_.HcclAllGather(send, recv, bytes, cann::kHcclDataTypeUint8, comm_, stream);
    if (hr != kHcclSuccess) throw_hccl_error(api_, op, hr, where);
  }
  bool has_all_gather_v() const override { return api_.HcclAllGatherV != nullptr; }
  const char* all_gather_v_name() const override { return "HcclAllGatherV"; }
  // HCCL_E_NOT_SUPPORT: HcclAllGatherV does not serve this communicator's topology.
  bool all_gather_v(void* send, uint64_t bytes, void* recv, const uint64_t* counts, const uint64_t* displs,
                    aclrtStream stream, const std::string& where) override {
    HcclResult hr = api_.HcclAllGatherV(send, bytes, recv, counts, displs, cann::kHcclDataTypeUint8, comm_, stream);
    if (hr == kHcclENotSupport) return false;
    if (hr != kHcclSuccess) throw_hccl_error(api_, "HcclAllGatherV", hr, where);
    return true;
  }
  // HcclCommDestroy returns HCCL_E_AGAIN while an operation is in flight: retried for a while
  // (the caller has force-destroyed the stream where it could), then the error is final.
  void destroy(const std::string& where) override {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kDestroyAgainMs);
    int64_t backoff_ms = 1;
    for (;;) {
      HcclResult hr = api_.HcclCommDestroy(comm_);
      if (hr == kHcclSuccess) return;
      if (hr != kHcclEAgain) throw_hccl_error(api_, "HcclCommDestroy", hr, where);
      if (std::chrono::steady_clock::now() >= deadline) {
        throw_hccl_error(api_, "HcclCommDestroy", hr,
                         where + " (an operation was still in flight after " + std::to_string(kDestroyAgainMs) +
                             " ms; the communicator leaks)");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(backoff_ms));
      backoff_ms = std::min<int64_t>(backoff_ms * 2, 100);
    }
  }

 private:
  const HcclApi& api_;
  HcclComm comm_;
};

// HcclCommInitRootInfo / HcclCommInitClusterInfo. The "resource busy, try again" class is
// retried with back-off until the communicator's timeout elapses, but only with a rank table:
// HCOMM erases the root's topology-detection server after the first HcclCommInitRootInfo
// attempt, success or failure, so a second attempt with the same root info could only wait out
// HCCL_CONNECT_TIMEOUT on every rank. A root-info init fails at once instead, saying so: the
// retry needs a fresh root info from the root, that is, a new rendezvous.
std::unique_ptr<cann::DeviceCollectives> connect(const HcclApi& api, const cann::DeviceCommunicator& device,
                                                 const HcclRootInfo* root_info, const HcclTimeouts& root_timeouts,
                                                 const std::string& rank_table_path) {
  using Clock = std::chrono::steady_clock;
  const bool by_table = !rank_table_path.empty();
  if (by_table) {
    const HcclTimeouts wanted = timeouts_for(device.timeout_ms());  // the same on every rank of the table
    latch_timeouts(&wanted);
  } else {
    join_timeouts(root_timeouts, device.where());
  }
  const char* op = by_table ? "HcclCommInitClusterInfo" : "HcclCommInitRootInfo";
  const uint32_t rank = static_cast<uint32_t>(device.rank());
  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline = start + std::chrono::milliseconds(device.timeout_ms());
  int64_t backoff_ms = kInitBackoffFirstMs;
  for (int attempts = 1;; ++attempts) {
    HcclComm created = nullptr;
    HcclResult hr = by_table
                        ? api.HcclCommInitClusterInfo(rank_table_path.c_str(), rank, &created)
                        : api.HcclCommInitRootInfo(static_cast<uint32_t>(device.size()), root_info, rank, &created);
    if (hr == kHcclSuccess) return std::unique_ptr<cann::DeviceCollectives>(new HcclCollectives(api, created));
    // Read once: CANN's recent-error text is consumed by reading it.
    const VendorError vendor = hccl_vendor_error(api, hr);
    const std::string text = cann::vendor_error_text(op, vendor, device.where());
    // The "previous process still alive" class, retried: HCCL_E_AGAIN, HCCL_E_UNAVAIL, and CANN's
    // EJ0001 ("Failed to initialize the HCCP process ... Maybe the last training process is
    // running. Wait for 10s after killing the last training process"), whatever code carries it:
    // the card's resources may still be held by a process that is exiting. Everything else is final.
    const bool busy = hr == kHcclEAgain || hr == kHcclEUnavail || vendor.message.find(kHccpBusy) != std::string::npos;
    if (!busy) throw_vendor_error(npg_code_of_hccl(hr), text, vendor);
    if (!by_table) {
      throw_vendor_error(npg_code_of_hccl(hr),
                         text +
                             "; not retried: HCCL consumed this root info at this first attempt (the root's "
                             "topology detection is gone), so a retry needs a fresh root info from the root rank, "
                             "a new rendezvous: the device may still be held by an earlier process; in Spark, "
                             "npugather.retryable=true lets the stage attempt retry with a new round",
                         vendor);
    }
    const Clock::time_point now = Clock::now();
    if (now + std::chrono::milliseconds(backoff_ms) >= deadline) {
      throw_vendor_error(NPG_TIMEOUT,
                         text + "; still failing after " + std::to_string(attempts) + " attempts in " +
                             std::to_string(ms_between(start, now)) + " ms (timeout " +
                             std::to_string(device.timeout_ms()) +
                             " ms): the device may still be held by an earlier process; wait for it to exit",
                         vendor);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(backoff_ms));
    backoff_ms = std::min(backoff_ms * 2, kInitBackoffMaxMs);
  }
}

}  // namespace

std::unique_ptr<cann::DeviceCommunicator> create_hccl_communicator(const CommConfig& config,
                                                                   const HcclRootInfo* root_info,
                                                                   const HcclTimeouts& root_timeouts,
                                                                   const std::string& rank_table_path) {
  const HcclApi& api = hccl_api();
  return cann::DeviceCommunicator::create(*api.acl, "hccl", config, [&](const cann::DeviceCommunicator& device) {
    return connect(api, device, root_info, root_timeouts, rank_table_path);
  });
}

}  // namespace hccl
}  // namespace npg

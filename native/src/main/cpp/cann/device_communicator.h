// The communicator of every device backend (hccl, lccl): one vendor communicator and one
// stream on one claimed device. Host buffers are staged through device memory; the
// collective runs on the device. The vendor library is behind DeviceCollectives.
#ifndef NPUGATHER_CANN_DEVICE_COMMUNICATOR_H_
#define NPUGATHER_CANN_DEVICE_COMMUNICATOR_H_

#include <stdint.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "../core/backend.h"
#include "../core/communicator.h"
#include "../core/error.h"
#include "acl_library.h"
#include "device_claim.h"
#include "device_rounds.h"

namespace npg {
namespace cann {

// What a vendor collective library does for a DeviceCommunicator. Calls run on the
// communicator's device, one at a time.
class DeviceCollectives {
 public:
  virtual ~DeviceCollectives() = default;
  // "HcclAllGather", for messages.
  virtual const char* all_gather_name() const = 0;
  // The most bytes per rank one call may move (HCCL refuses counts above SYS_MAX_COUNT).
  virtual uint64_t max_call_bytes() const { return UINT64_MAX; }
  // Enqueues on stream an all-gather of bytes per rank (recv holds rank_size * bytes);
  // throws the vendor's error, with op naming the call in the message.
  virtual void all_gather(const char* op, void* send, void* recv, uint64_t bytes, aclrtStream stream,
                          const std::string& where) = 0;
  // True when the library has an all-gather-v. Whether the topology allows it is decided by
  // DeviceCommunicator (see all_gather_v_topology) and, last, by the library's own refusal.
  virtual bool has_all_gather_v() const { return false; }
  virtual const char* all_gather_v_name() const { return "all-gather-v"; }
  // Enqueues an all-gather-v in bytes: rank r's counts[r] bytes land at recv + displs[r].
  // Returns false, with nothing enqueued, when the library refuses it for this communicator's
  // topology (the same on every rank); throws its other errors.
  virtual bool all_gather_v(void* send, uint64_t bytes, void* recv, const uint64_t* counts, const uint64_t* displs,
                            aclrtStream stream, const std::string& where);
  // Releases the vendor communicator; called once, after no collective of it can still be in
  // flight (the stream finished or was force-destroyed). Throws the vendor's error.
  virtual void destroy(const std::string& where) = 0;
};

class DeviceCommunicator final : public Communicator {
 public:
  // Creates the vendor communicator on the bound device, or throws.
  using Connect = std::function<std::unique_ptr<DeviceCollectives>(const DeviceCommunicator&)>;

  // Claims config.device_id for this process, binds it, creates the stream, then runs connect.
  // On failure everything acquired so far is released before the error propagates.
  static std::unique_ptr<DeviceCommunicator> create(const AclApi& api, const std::string& backend,
                                                    const CommConfig& config, const Connect& connect);
  ~DeviceCommunicator() override;

  int32_t rank() const override { return rank_; }
  int32_t size() const override { return size_; }
  int32_t device() const { return device_; }
  int64_t timeout_ms() const { return timeout_ms_; }
  const AclApi& api() const { return api_; }
  // The backend's name, e.g. "hccl".
  const char* transport() const override { return backend_.c_str(); }
  // "on rank 1 (device 1)", for messages.
  std::string where() const;
  // ACL's current device is per thread and Java calls from pooled threads: every path binds.
  void bind_device() const;

  // Gathers through device buffers of at most the device budget (kDeviceBufferVariable, else half
  // the free device memory; the smallest over the ranks), in rounds when the blocks do not fit at
  // once: round k moves bytes [k * chunk, (k + 1) * chunk) of every block, and its copy to the
  // host overlaps the next round's transfer.
  void all_gather_v(const npg_segment_t* segments, size_t segment_count, bool write_own, void* recv,
                    const uint64_t* counts_bytes, const uint64_t* displs_bytes) override;
  uint64_t device_bytes() const override { return device_bytes_.load(); }
  // Interruptible: the wait for the stream, which polls aclrtStreamQuery (at least every
  // millisecond; silent, unlike an expired synchronize) or, on runtimes without it, waits in
  // 100 ms slices of aclrtSynchronizeStreamWithTimeout (each expired one an ERROR in CANN's log).
  // Not interruptible: an enqueue or a copy already inside CANN, and the blocking
  // aclrtSynchronizeStream of runtimes without either (there only the vendor's own execution
  // timeout bounds a stuck collective). The vendor communicator is released (see close) as soon
  // as no call uses it.
  void abort() noexcept override;
  // Tears down in the order CANN requires, trying every step and throwing the first failure: a
  // stream a failed collective may still run on is force-destroyed (its pending work discarded:
  // HcclCommDestroy does not wait for work queued on a stream, which must not run on a destroyed
  // communicator), then the vendor communicator, the stream, the device buffers (only once no
  // stream can touch them), the device (aclrtResetDevice) and the claim.
  void close() override;

 private:
  class DeviceBuffer;
  using Clock = std::chrono::steady_clock;

  DeviceCommunicator(const AclApi& api, const std::string& backend, const CommConfig& config);
  void begin_call();
  void end_call() noexcept;
  // The first two steps of close; an error goes to *first unless one is there.
  void release_vendor_locked(std::unique_ptr<Error>* first) noexcept;
  // Runs one collective that enqueue() puts on the stream, then waits for the stream.
  // Runs one collective that enqueue() puts on the stream, then meanwhile() (host work that
  // overlaps it), then waits for the stream. On failure the buffers outlive the stream.
  template <typename Enqueue, typename Meanwhile>
  void run_collective(const char* op, Enqueue&& enqueue, Meanwhile&& meanwhile, std::vector<DeviceBuffer*> buffers,
                      Clock::time_point deadline);
  template <typename Enqueue>
  void run_collective(const char* op, Enqueue&& enqueue, std::vector<DeviceBuffer*> buffers,
                      Clock::time_point deadline) {
    run_collective(
        op, enqueue, [] {}, std::move(buffers), deadline);
  }
  void wait_stream(const char* op, Clock::time_point deadline);
  // The device memory this rank's gather may hold: the setting, else half the free memory.
  uint64_t device_budget() const;
  struct Agreement {
    std::vector<uint64_t> servers;  // each rank's server (boot id hash)
    uint64_t budget = 0;            // the smallest device budget of any rank
  };
  // Throws unless every rank passed the same counts.
  Agreement check_same_layout(const uint64_t* counts_bytes, Clock::time_point deadline);
  // The gather of the ragged or equal layout in the rounds of plan, through the all-gather-v
  // (use_v) or padded blocks; false when the library refused the all-gather-v (nothing moved).
  bool gather(const npg_segment_t* segments, size_t segment_count, bool write_own, void* recv,
              const uint64_t* counts_bytes, const uint64_t* displs_bytes, bool use_v, uint64_t budget,
              Clock::time_point deadline);

  const AclApi& api_;
  const std::string backend_;
  int32_t rank_;
  int32_t size_;
  int32_t device_;
  int64_t timeout_ms_;
  uint64_t buffer_setting_ = 0;  // kDeviceBufferVariable, 0 when unset
  std::atomic<uint64_t> device_bytes_{0};
  DeviceClaim claim_;
  std::mutex mutex_;  // guards collectives_, busy_, broken_, quarantine_
  std::unique_ptr<DeviceCollectives> collectives_;
  aclrtStream stream_ = nullptr;
  bool stream_pending_ = false;  // a collective failed: the stream may still hold its work
  bool busy_ = false;
  // Whether the all-gather-v may be used: unknown (-1) until the first ragged gather decides it
  // from the SoC and the servers; 0 for good once the library refused it.
  int all_gather_v_allowed_ = -1;
  std::atomic<bool> aborted_{false};
  std::string broken_;  // first failure that leaves the stream or the communicator unusable
  // Device buffers a stream that did not finish may still touch; freed after the stream is gone.
  std::vector<void*> quarantine_;
};

// The device npg_get_root_info runs on, which a device backend needs before the vendor's
// root call: device_text when not empty (from bind_address "device:N"), else the device
// already current on this thread, else NPUGATHER_DEVICE_ID, else 0. Binds it.
int32_t bind_root_device(const AclApi& api, const std::string& device_text);

// Whether HcclAllGatherV works for soc (aclrtGetSocName; "" when unknown) with the given number
// of ranks on each server, as HCCL's HcclAllGatherV doc states: Atlas A3 (Ascend910_93*) and
// the Atlas 300I Duo (Ascend310P*) on one server only, Atlas A2 (Ascend910B*) only when every
// server has as many ranks, Ascend 950 everywhere, the Atlas training series (other Ascend910*)
// and unknown SoCs never.
bool all_gather_v_topology(const std::string& soc, const std::vector<int32_t>& ranks_per_server);

// Parses a non-negative device id; NPG_INVALID_ARGUMENT naming name otherwise.
int32_t parse_device_id(const std::string& text, const std::string& name);

}  // namespace cann
}  // namespace npg

#endif  // NPUGATHER_CANN_DEVICE_COMMUNICATOR_H_

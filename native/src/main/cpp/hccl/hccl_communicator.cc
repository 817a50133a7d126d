#include "hccl_communicator.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <thread>
#include <utility>

#include "../core/error.h"
#include "cann_errors.h"

namespace npg {
namespace hccl {
namespace {

constexpr int64_t kPollSliceMs = 100;
constexpr int64_t kInitBackoffFirstMs = 100;
constexpr int64_t kInitBackoffMaxMs = 2000;
constexpr size_t kPackSegmentsAbove = 16;
// HCCL's documented ranges: HCCL_CONNECT_TIMEOUT [120, 7200] s. HCCL_EXEC_TIMEOUT is capped at
// 1091 s in AIV mode and rounded down to a multiple of 68 on some products, so [68, 1091] is
// valid everywhere and never 0 ("wait forever").
constexpr int64_t kConnectTimeoutMinS = 120;
constexpr int64_t kConnectTimeoutMaxS = 7200;
constexpr int64_t kExecTimeoutMinS = 68;
constexpr int64_t kExecTimeoutMaxS = 1091;

// Adds "NAME=VALUE" entries to the environment without setenv. setenv may realloc and free
// the array that getenv in another thread is walking at that moment (rank threads, CANN
// itself and the JVM all call getenv); here the new array is complete before it is published
// with one pointer store, and the old one is never freed.
void publish_env_entries(const std::vector<std::string>& entries) {
  if (entries.empty()) return;
  size_t n = 0;
  while (environ != nullptr && environ[n] != nullptr) ++n;
  char** fresh = new char*[n + entries.size() + 1];
  for (size_t i = 0; i < n; ++i) fresh[i] = environ[i];
  for (size_t i = 0; i < entries.size(); ++i) fresh[n + i] = strdup(entries[i].c_str());
  fresh[n + entries.size()] = nullptr;
  __atomic_store_n(&environ, fresh, __ATOMIC_RELEASE);  // both arrays stay valid for readers
}

// HCCL reads its timeouts from the environment. Set once per process (from the first
// communicator's timeout) and only what the user has not set.
void apply_timeout_env(int64_t timeout_ms) {
  static std::mutex* mutex = new std::mutex();
  static bool done = false;
  std::lock_guard<std::mutex> lock(*mutex);
  if (done) return;
  done = true;
  const int64_t seconds = timeout_ms / 1000 + (timeout_ms % 1000 != 0);
  std::vector<std::string> entries;
  if (getenv("HCCL_CONNECT_TIMEOUT") == nullptr) {
    int64_t v = std::min(std::max(seconds, kConnectTimeoutMinS), kConnectTimeoutMaxS);
    entries.push_back("HCCL_CONNECT_TIMEOUT=" + std::to_string(v));
  }
  if (getenv("HCCL_EXEC_TIMEOUT") == nullptr) {
    int64_t v = std::min(std::max(seconds, kExecTimeoutMinS), kExecTimeoutMaxS);
    entries.push_back("HCCL_EXEC_TIMEOUT=" + std::to_string(v));
  }
  publish_env_entries(entries);
}

// FNV-1a over the rank count and the byte counts: equal on all ranks iff (almost surely) the layouts are.
uint64_t layout_hash(const uint64_t* counts, int32_t n) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xffu;
      h *= 1099511628211ull;
    }
  };
  mix(static_cast<uint64_t>(n));
  for (int32_t r = 0; r < n; ++r) mix(counts[r]);
  return h;
}

int64_t ms_between(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(b - a).count();
}

}  // namespace

// Device memory owned until freed or handed to the quarantine.
class HcclCommunicator::DeviceBuffer {
 public:
  DeviceBuffer(const CannApi& api, uint64_t bytes, const std::string& where) : api_(api) {
    if (bytes > SIZE_MAX) throw_error(NPG_INVALID_ARGUMENT, "device buffer of " + std::to_string(bytes) + " bytes");
    bytes_ = std::max<size_t>(static_cast<size_t>(bytes), 1);
    aclError rc = api_.aclrtMalloc(&ptr_, bytes_, kAclMemMallocHugeFirst);
    if (rc != kAclSuccess) {
      ptr_ = nullptr;
      throw_acl_error(api_, "aclrtMalloc", rc, "(" + std::to_string(bytes_) + " bytes) " + where);
    }
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (ptr_ != nullptr) api_.aclrtFree(ptr_);
  }
  uint8_t* data() const { return static_cast<uint8_t*>(ptr_); }
  size_t bytes() const { return bytes_; }
  void* release() {
    void* p = ptr_;
    ptr_ = nullptr;
    return p;
  }

 private:
  const CannApi& api_;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

HcclCommunicator::HcclCommunicator(const CannApi& api, const CommConfig& config)
    : api_(api),
      rank_(config.rank),
      size_(config.rank_size),
      device_(config.device_id),
      timeout_ms_(config.timeout_ms) {}

HcclCommunicator::~HcclCommunicator() {
  try {
    close();
  } catch (...) {
  }
}

std::unique_ptr<HcclCommunicator> HcclCommunicator::create(const CommConfig& config, const HcclRootInfo* root_info,
                                                           const std::string& rank_table_path) {
  const CannApi& api = cann_api();
  ensure_acl_initialized(api);
  std::unique_ptr<HcclCommunicator> comm(new HcclCommunicator(api, config));
  comm->claim_ = DeviceClaim::acquire(config.device_id, "rank " + std::to_string(config.rank) + " of " +
                                                            std::to_string(config.rank_size));
  comm->init_comm(root_info, rank_table_path);  // on failure the destructor releases what exists
  return comm;
}

std::string HcclCommunicator::where() const {
  return "on rank " + std::to_string(rank_) + " (device " + std::to_string(device_) + ")";
}

// ACL's current device is per thread and Java calls from pooled threads: bind on every path.
void HcclCommunicator::bind_device() const {
  int32_t current = -1;
  if (api_.aclrtGetDevice(&current) == kAclSuccess && current == device_) return;
  aclError rc = api_.aclrtSetDevice(device_);
  if (rc != kAclSuccess) throw_acl_error(api_, "aclrtSetDevice", rc, where());
}

void HcclCommunicator::init_comm(const HcclRootInfo* root_info, const std::string& rank_table_path) {
  bind_device();
  apply_timeout_env(timeout_ms_);
  aclError rc = api_.aclrtCreateStream(&stream_);
  if (rc != kAclSuccess) {
    stream_ = nullptr;
    throw_acl_error(api_, "aclrtCreateStream", rc, where());
  }
  const bool by_table = !rank_table_path.empty();
  const char* op = by_table ? "HcclCommInitClusterInfo" : "HcclCommInitRootInfo";
  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline = start + std::chrono::milliseconds(timeout_ms_);
  int64_t backoff_ms = kInitBackoffFirstMs;
  for (int attempts = 1;; ++attempts) {
    HcclComm created = nullptr;
    HcclResult hr = by_table ? api_.HcclCommInitClusterInfo(rank_table_path.c_str(), static_cast<uint32_t>(rank_),
                                                            &created)
                             : api_.HcclCommInitRootInfo(static_cast<uint32_t>(size_), root_info,
                                                         static_cast<uint32_t>(rank_), &created);
    if (hr == kHcclSuccess) {
      std::lock_guard<std::mutex> lock(mutex_);
      comm_ = created;
      return;
    }
    // E_AGAIN and E_UNAVAIL are the "resource busy, try again" class: the card's resources
    // may still be held by a process that is exiting. Everything else is final.
    if (hr != kHcclEAgain && hr != kHcclEUnavail) throw_hccl_error(api_, op, hr, where());
    const Clock::time_point now = Clock::now();
    if (now + std::chrono::milliseconds(backoff_ms) >= deadline) {
      throw_vendor_error(NPG_TIMEOUT, hccl_error_text(api_, op, hr, where()) + "; still failing after " +
                                   std::to_string(attempts) + " attempts in " + std::to_string(ms_between(start, now)) +
                                   " ms (timeout " + std::to_string(timeout_ms_) +
                                   " ms): the device may still be held by an earlier process; wait for it to exit",
                         hccl_vendor_error(api_, hr));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(backoff_ms));
    backoff_ms = std::min(backoff_ms * 2, kInitBackoffMaxMs);
  }
}

void HcclCommunicator::begin_call() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (aborted_.load()) throw_error(NPG_ABORTED, "the communicator was aborted");
  if (!broken_.empty()) {
    throw_error(NPG_INVALID_USAGE, "communicator is unusable after an earlier failure (" + broken_ +
                                       "); destroy it and create a new one");
  }
  if (comm_ == nullptr) throw_error(NPG_INVALID_USAGE, "communicator is closed");
  if (busy_) {
    throw_error(NPG_INVALID_USAGE, "another collective is running on this communicator " + where() +
                                       "; HCCL runs one communicating operation per device at a time");
  }
  busy_ = true;
}

void HcclCommunicator::end_call() noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  busy_ = false;
  if (aborted_.load()) destroy_comm_locked();
}

void HcclCommunicator::destroy_comm_locked() noexcept {
  if (comm_ == nullptr) return;
  try {
    bind_device();
  } catch (...) {
  }
  api_.HcclCommDestroy(comm_);
  comm_ = nullptr;
}

// HCCL has no portable abort: the flag makes later calls fail, the stream wait notices it
// within one poll slice, and the HcclComm is destroyed as soon as no call uses it.
void HcclCommunicator::abort() noexcept {
  aborted_.store(true);
  std::lock_guard<std::mutex> lock(mutex_);
  if (!busy_) destroy_comm_locked();
}

void HcclCommunicator::wait_stream(const char* op, Clock::time_point deadline) {
  if (api_.aclrtSynchronizeStreamWithTimeout == nullptr) {
    aclError rc = api_.aclrtSynchronizeStream(stream_);
    if (rc != kAclSuccess) {
      throw_acl_error(api_, "aclrtSynchronizeStream", rc, std::string("after ") + op + " " + where());
    }
    if (aborted_.load()) throw_error(NPG_ABORTED, std::string("the communicator was aborted during ") + op);
    return;
  }
  for (;;) {
    if (aborted_.load()) {
      throw_error(NPG_ABORTED, std::string("the communicator was aborted while waiting for ") + op + " " + where());
    }
    const int64_t remaining = ms_between(Clock::now(), deadline);
    if (remaining <= 0) {
      throw_error(NPG_TIMEOUT, std::string(op) + " did not complete within the timeout of " +
                                   std::to_string(timeout_ms_) + " ms " + where() +
                                   " (aclrtSynchronizeStreamWithTimeout kept returning "
                                   "ACL_ERROR_RT_STREAM_SYNC_TIMEOUT (507046)); a peer may have failed, exited or "
                                   "not called the collective");
    }
    aclError rc = api_.aclrtSynchronizeStreamWithTimeout(stream_, static_cast<int32_t>(std::min(remaining, kPollSliceMs)));
    if (rc == kAclSuccess) return;
    if (rc != kAclErrorRtStreamSyncTimeout) {
      throw_acl_error(api_, "aclrtSynchronizeStreamWithTimeout", rc, std::string("after ") + op + " " + where());
    }
  }
}

template <typename Enqueue>
void HcclCommunicator::run_collective(const char* op, Enqueue&& enqueue, std::vector<DeviceBuffer*> buffers,
                                      Clock::time_point deadline) {
  try {
    HcclResult hr = enqueue();
    if (hr != kHcclSuccess) throw_hccl_error(api_, op, hr, where());
    wait_stream(op, deadline);
  } catch (const Error& e) {
    // The stream may still run the collective: its buffers live until the stream is gone.
    std::lock_guard<std::mutex> lock(mutex_);
    for (DeviceBuffer* b : buffers) quarantine_.push_back(b->release());
    if (e.code() != NPG_ABORTED && broken_.empty()) broken_ = e.what();
    throw;
  }
}

// Every rank all-gathers a digest of its layout first, so ranks that disagree all fail
// with NPG_INVALID_USAGE instead of corrupting memory or hanging inside HCCL.
void HcclCommunicator::check_same_layout(const uint64_t* counts_bytes, Clock::time_point deadline) {
  const uint64_t mine[2] = {layout_hash(counts_bytes, size_), static_cast<uint64_t>(size_)};
  DeviceBuffer send(api_, sizeof(mine), where());
  DeviceBuffer recv(api_, sizeof(mine) * static_cast<uint64_t>(size_), where());
  aclError rc = api_.aclrtMemcpy(send.data(), send.bytes(), mine, sizeof(mine), kAclMemcpyHostToDevice);
  if (rc != kAclSuccess) throw_acl_error(api_, "aclrtMemcpy (host to device)", rc, where());
  run_collective(
      "HcclAllGather (layout check)",
      [&] { return api_.HcclAllGather(send.data(), recv.data(), sizeof(mine), kHcclDataTypeUint8, comm_, stream_); },
      {&send, &recv}, deadline);
  std::vector<uint64_t> all(2 * static_cast<size_t>(size_));
  rc = api_.aclrtMemcpy(all.data(), all.size() * sizeof(uint64_t), recv.data(), all.size() * sizeof(uint64_t),
                        kAclMemcpyDeviceToHost);
  if (rc != kAclSuccess) throw_acl_error(api_, "aclrtMemcpy (device to host)", rc, where());
  std::string differing;
  for (int32_t r = 0; r < size_; ++r) {
    if (all[2 * r] != mine[0] || all[2 * r + 1] != mine[1]) {
      differing += (differing.empty() ? "" : ", ") + std::to_string(r);
    }
  }
  if (!differing.empty()) {
    throw_error(NPG_INVALID_USAGE, "ranks disagree on recv_counts: rank(s) " + differing +
                                       " passed a different layout than rank " + std::to_string(rank_) +
                                       "; every rank must pass the same recv_counts");
  }
}

void HcclCommunicator::all_gather_v(const npg_segment_t* segments, size_t segment_count, bool write_own, void* recv,
                                    const uint64_t* counts_bytes, const uint64_t* displs_bytes) {
  begin_call();
  struct EndCall {
    HcclCommunicator* self;
    ~EndCall() { self->end_call(); }
  } end_call_guard{this};

  bind_device();
  const Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(timeout_ms_);
  check_same_layout(counts_bytes, deadline);

  const int32_t n = size_;
  uint64_t max_count = 0;
  for (int32_t r = 0; r < n; ++r) max_count = std::max(max_count, counts_bytes[r]);
  if (max_count == 0) return;
  bool equal = true;
  for (int32_t r = 0; r < n; ++r) equal = equal && counts_bytes[r] == max_count;
  // Ragged without HcclAllGatherV: every block padded to the largest, then trimmed on the way out.
  const bool use_v = !equal && api_.HcclAllGatherV != nullptr;
  const bool padded = !equal && !use_v;
  if (padded && max_count > UINT64_MAX / static_cast<uint64_t>(n)) {
    throw_error(NPG_INVALID_ARGUMENT, "rank_size * largest block overflows 64-bit sizes");
  }
  const uint64_t own = counts_bytes[rank_];

  DeviceBuffer send(api_, padded ? max_count : own, where());
  // Gather this rank's segments into the device send buffer.
  if (segment_count > kPackSegmentsAbove) {
    std::vector<uint8_t> packed(own);
    uint64_t off = 0;
    for (size_t i = 0; i < segment_count; ++i) {
      if (segments[i].bytes == 0) continue;
      memcpy(packed.data() + off, segments[i].address, segments[i].bytes);
      off += segments[i].bytes;
    }
    if (own > 0) {
      aclError rc = api_.aclrtMemcpy(send.data(), send.bytes(), packed.data(), own, kAclMemcpyHostToDevice);
      if (rc != kAclSuccess) throw_acl_error(api_, "aclrtMemcpy (host to device)", rc, where());
    }
  } else {
    uint64_t off = 0;
    for (size_t i = 0; i < segment_count; ++i) {
      if (segments[i].bytes == 0) continue;
      aclError rc = api_.aclrtMemcpy(send.data() + off, send.bytes() - off, segments[i].address, segments[i].bytes,
                                     kAclMemcpyHostToDevice);
      if (rc != kAclSuccess) throw_acl_error(api_, "aclrtMemcpy (host to device)", rc, where());
      off += segments[i].bytes;
    }
  }

  std::vector<uint64_t> offsets(n);
  uint64_t recv_bytes = 0;
  for (int32_t r = 0; r < n; ++r) {
    offsets[r] = use_v ? recv_bytes : static_cast<uint64_t>(r) * max_count;
    recv_bytes += use_v ? counts_bytes[r] : max_count;
  }
  DeviceBuffer gathered(api_, recv_bytes, where());
  if (use_v) {
    run_collective(
        "HcclAllGatherV",
        [&] {
          return api_.HcclAllGatherV(send.data(), own, gathered.data(), counts_bytes, offsets.data(),
                                     kHcclDataTypeUint8, comm_, stream_);
        },
        {&send, &gathered}, deadline);
  } else {
    run_collective(
        "HcclAllGather",
        [&] { return api_.HcclAllGather(send.data(), gathered.data(), max_count, kHcclDataTypeUint8, comm_, stream_); },
        {&send, &gathered}, deadline);
  }

  uint8_t* out = static_cast<uint8_t*>(recv);
  for (int32_t r = 0; r < n; ++r) {
    if (counts_bytes[r] == 0 || (r == rank_ && !write_own)) continue;
    aclError rc = api_.aclrtMemcpy(out + displs_bytes[r], counts_bytes[r], gathered.data() + offsets[r],
                                   counts_bytes[r], kAclMemcpyDeviceToHost);
    if (rc != kAclSuccess) throw_acl_error(api_, "aclrtMemcpy (device to host)", rc, where());
  }
}

// Tries every step and throws the first failure: the comm, then the stream, then the
// quarantined device buffers (safe only once the stream is gone), then the device claim.
void HcclCommunicator::close() {
  std::unique_ptr<Error> first;
  auto keep = [&](const Error& e) {
    if (!first) first.reset(new Error(e));
  };
  std::lock_guard<std::mutex> lock(mutex_);
  if (comm_ != nullptr || stream_ != nullptr || !quarantine_.empty()) {
    try {
      bind_device();
    } catch (const Error& e) {
      keep(e);
    }
  }
  if (comm_ != nullptr) {
    HcclResult hr = api_.HcclCommDestroy(comm_);
    comm_ = nullptr;
    if (hr != kHcclSuccess) {
      keep(Error(npg_code_of_hccl(hr), hccl_error_text(api_, "HcclCommDestroy", hr, where()),
                 hccl_vendor_error(api_, hr)));
    }
  }
  if (stream_ != nullptr) {
    aclError rc = api_.aclrtDestroyStream(stream_);
    stream_ = nullptr;
    if (rc != kAclSuccess) keep(Error(npg_code_of_acl(rc), acl_error_text(api_, "aclrtDestroyStream", rc, where()), acl_vendor_error(api_, rc)));
  }
  for (void* p : quarantine_) {
    if (p == nullptr) continue;
    aclError rc = api_.aclrtFree(p);
    if (rc != kAclSuccess) keep(Error(npg_code_of_acl(rc), acl_error_text(api_, "aclrtFree", rc, where()), acl_vendor_error(api_, rc)));
  }
  quarantine_.clear();
  claim_.release();
  if (first) throw *first;
}

}  // namespace hccl
}  // namespace npg

#include "device_communicator.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <fstream>
#include <thread>
#include <utility>

#include "../core/error.h"
#include "cann_errors.h"

namespace npg {
namespace cann {
namespace {

// Runtimes without aclrtStreamQuery: the slices of aclrtSynchronizeStreamWithTimeout.
constexpr int64_t kPollSliceMs = 100;
// The pauses between aclrtStreamQuery polls: from 50 us, doubling, to at most 1 ms, so a short
// collective is seen done at once and a long one costs about 1000 cheap queries a second.
constexpr int64_t kQueryFirstPauseUs = 50;
constexpr int64_t kQueryMaxPauseUs = 1000;
constexpr size_t kPackSegmentsAbove = 16;

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

// How often each device was reset by this process (aclrtResetDevice at a communicator's close).
constexpr int32_t kEpochDevices = 1024;
std::atomic<uint64_t>& device_epoch(int32_t device) {
  static std::atomic<uint64_t>* epochs = new std::atomic<uint64_t>[kEpochDevices]();
  return epochs[static_cast<uint32_t>(device) % kEpochDevices];
}
// The epoch of the device this thread last set; any thread sets one device at a time.
thread_local uint64_t t_bound_epoch = UINT64_MAX;

// This host's kernel boot id, hashed: ranks on one server share it.
uint64_t server_hash() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  uint64_t h = 1469598103934665603ull;
  for (char c : id) {
    h ^= static_cast<uint8_t>(c);
    h *= 1099511628211ull;
  }
  return h;
}

int64_t ms_between(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(b - a).count();
}

}  // namespace

bool DeviceCollectives::all_gather_v(void*, uint64_t, void*, const uint64_t*, const uint64_t*, aclrtStream,
                                     const std::string&) {
  throw_error(NPG_INTERNAL_ERROR, std::string(all_gather_name()) + " has no all-gather-v");
}

bool all_gather_v_topology(const std::string& soc, const std::vector<int32_t>& ranks_per_server) {
  auto starts = [&soc](const char* prefix) { return soc.compare(0, strlen(prefix), prefix) == 0; };
  if (starts("Ascend950")) return true;
  if (starts("Ascend910_93") || starts("Ascend310P")) return ranks_per_server.size() == 1;
  if (starts("Ascend910B")) {
    for (int32_t n : ranks_per_server)
      if (n != ranks_per_server.front()) return false;
    return !ranks_per_server.empty();
  }
  return false;
}

// Device memory owned until freed or handed to the quarantine.
class DeviceCommunicator::DeviceBuffer {
 public:
  DeviceBuffer(const AclApi& api, uint64_t bytes, const std::string& where) : api_(api) {
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
  const AclApi& api_;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

DeviceCommunicator::DeviceCommunicator(const AclApi& api, const std::string& backend, const CommConfig& config)
    : api_(api),
      backend_(backend),
      rank_(config.rank),
      size_(config.rank_size),
      device_(config.device_id),
      timeout_ms_(config.timeout_ms) {
  const char* setting = getenv(kDeviceBufferVariable);
  if (setting != nullptr && setting[0] != '\0') buffer_setting_ = parse_device_buffer_bytes(setting);
}

DeviceCommunicator::~DeviceCommunicator() {
  try {
    close();
  } catch (...) {
  }
}

std::unique_ptr<DeviceCommunicator> DeviceCommunicator::create(const AclApi& api, const std::string& backend,
                                                               const CommConfig& config, const Connect& connect) {
  std::unique_ptr<DeviceCommunicator> comm(new DeviceCommunicator(api, backend, config));
  comm->claim_ = DeviceClaim::acquire(
      config.device_id, backend, "rank " + std::to_string(config.rank) + " of " + std::to_string(config.rank_size));
  // On failure the destructor releases what exists.
  comm->bind_device();
  aclError rc = api.aclrtCreateStream(&comm->stream_);
  if (rc != kAclSuccess) {
    comm->stream_ = nullptr;
    throw_acl_error(api, "aclrtCreateStream", rc, comm->where());
  }
  std::unique_ptr<DeviceCollectives> collectives = connect(*comm);
  std::lock_guard<std::mutex> lock(comm->mutex_);
  comm->collectives_ = std::move(collectives);
  return comm;
}

std::string DeviceCommunicator::where() const {
  return "on rank " + std::to_string(rank_) + " (device " + std::to_string(device_) + ")";
}

void DeviceCommunicator::bind_device() const {
  // A thread that set the device before its last reset (by another communicator's close) must
  // set it again, whatever aclrtGetDevice still reports.
  const uint64_t epoch = device_epoch(device_).load();
  int32_t current = -1;
  if (api_.aclrtGetDevice(&current) == kAclSuccess && current == device_ && t_bound_epoch == epoch) return;
  aclError rc = api_.aclrtSetDevice(device_);
  if (rc != kAclSuccess) throw_acl_error(api_, "aclrtSetDevice", rc, where());
  t_bound_epoch = epoch;
}

void DeviceCommunicator::begin_call() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (aborted_.load()) throw_error(NPG_ABORTED, "the communicator was aborted");
  if (!broken_.empty()) {
    throw_error(NPG_INVALID_USAGE,
                "communicator is unusable after an earlier failure (" + broken_ + "); destroy it and create a new one");
  }
  if (!collectives_) throw_error(NPG_INVALID_USAGE, "communicator is closed");
  if (busy_) {
    throw_error(NPG_INVALID_USAGE, "another collective is running on this communicator " + where() +
                                       "; one communicating operation per device at a time");
  }
  busy_ = true;
}

void DeviceCommunicator::end_call() noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  busy_ = false;
  if (aborted_.load()) release_vendor_locked(nullptr);
}

void DeviceCommunicator::release_vendor_locked(std::unique_ptr<Error>* first) noexcept {
  auto keep = [&](const Error& e) {
    if (first != nullptr && !*first) first->reset(new Error(e));
  };
  const bool force_stream = stream_pending_ && stream_ != nullptr && api_.aclrtDestroyStreamForce != nullptr;
  if (!collectives_ && !force_stream) return;
  try {
    bind_device();
  } catch (const Error& e) {
    keep(e);
  }
  if (force_stream) {
    aclError rc = api_.aclrtDestroyStreamForce(stream_);
    stream_ = nullptr;
    stream_pending_ = false;
    if (rc != kAclSuccess) {
      keep(Error(npg_code_of_acl(rc), acl_error_text(api_, "aclrtDestroyStreamForce", rc, where()),
                 acl_vendor_error(api_, rc)));
    }
  }
  if (collectives_) {
    try {
      collectives_->destroy(where());
    } catch (const Error& e) {
      keep(e);
    } catch (...) {
    }
    collectives_.reset();
  }
}

// The vendors have no portable abort: the flag makes later calls fail, the stream wait notices
// it within one poll slice, and the vendor communicator is destroyed as soon as no call uses it.
void DeviceCommunicator::abort() noexcept {
  aborted_.store(true);
  std::lock_guard<std::mutex> lock(mutex_);
  if (!busy_) release_vendor_locked(nullptr);
}

// CANN logs every expired aclrtSynchronizeStreamWithTimeout at ERROR and reports an error
// message (ApiImpl::StreamSynchronize), so a long collective waited for in slices would fill the
// vendor's log with errors and bury the text of a real failure. aclrtStreamQuery is silent: it is
// polled, with a growing pause, until the stream is done; then aclrtSynchronizeStream returns at
// once, with the error of a task that failed.
void DeviceCommunicator::wait_stream(const char* op, Clock::time_point deadline) {
  if (api_.aclrtStreamQuery != nullptr) {
    int64_t pause_us = kQueryFirstPauseUs;
    for (;;) {
      if (aborted_.load()) {
        throw_error(NPG_ABORTED, std::string("the communicator was aborted while waiting for ") + op + " " + where());
      }
      int status = kAclStreamStatusComplete;
      aclError rc = api_.aclrtStreamQuery(stream_, &status);
      if (rc != kAclSuccess) {
        throw_acl_error(api_, "aclrtStreamQuery", rc, std::string("after ") + op + " " + where());
      }
      if (status == kAclStreamStatusComplete) break;
      const auto remaining = deadline - Clock::now();
      if (remaining <= Clock::duration::zero()) {
        throw_error(NPG_TIMEOUT, std::string(op) + " did not complete within the timeout of " +
                                     std::to_string(timeout_ms_) + " ms " + where() +
                                     " (aclrtStreamQuery kept reporting the stream not ready); a peer may have "
                                     "failed, exited or not called the collective");
      }
      std::this_thread::sleep_for(std::min<Clock::duration>(remaining, std::chrono::microseconds(pause_us)));
      pause_us = std::min(pause_us * 2, kQueryMaxPauseUs);
    }
    aclError rc = api_.aclrtSynchronizeStream(stream_);
    if (rc != kAclSuccess) {
      throw_acl_error(api_, "aclrtSynchronizeStream", rc, std::string("after ") + op + " " + where());
    }
    return;
  }
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
    aclError rc =
        api_.aclrtSynchronizeStreamWithTimeout(stream_, static_cast<int32_t>(std::min(remaining, kPollSliceMs)));
    if (rc == kAclSuccess) return;
    if (rc != kAclErrorRtStreamSyncTimeout) {
      throw_acl_error(api_, "aclrtSynchronizeStreamWithTimeout", rc, std::string("after ") + op + " " + where());
    }
  }
}

template <typename Enqueue, typename Meanwhile>
void DeviceCommunicator::run_collective(const char* op, Enqueue&& enqueue, Meanwhile&& meanwhile,
                                        std::vector<DeviceBuffer*> buffers, Clock::time_point deadline) {
  try {
    enqueue();
    meanwhile();
    wait_stream(op, deadline);
  } catch (const Error& e) {
    // The stream may still run the collective: its buffers live until the stream is gone.
    std::lock_guard<std::mutex> lock(mutex_);
    for (DeviceBuffer* b : buffers) quarantine_.push_back(b->release());
    stream_pending_ = true;
    if (e.code() != NPG_ABORTED && broken_.empty()) broken_ = e.what();
    throw;
  }
}

uint64_t DeviceCommunicator::device_budget() const {
  if (buffer_setting_ != 0) return buffer_setting_;
  if (api_.aclrtGetMemInfo == nullptr) return kDeviceBufferWithoutMemInfo;
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  aclError rc = api_.aclrtGetMemInfo(kAclHbmMem, &free_bytes, &total_bytes);
  if (rc != kAclSuccess) throw_acl_error(api_, "aclrtGetMemInfo", rc, where());
  return std::max<uint64_t>(free_bytes / 2, kMinDeviceBufferBytes);
}

// Every rank all-gathers a digest of its layout first, so ranks that disagree all fail
// with NPG_INVALID_USAGE instead of corrupting memory or hanging inside the vendor library.
// The digest carries the rank's server too, for the all-gather-v's topology rule, and its
// device budget: every rank must cut the same rounds.
DeviceCommunicator::Agreement DeviceCommunicator::check_same_layout(const uint64_t* counts_bytes,
                                                                    Clock::time_point deadline) {
  static const uint64_t server = server_hash();
  constexpr int kWords = 4;
  const uint64_t mine[kWords] = {layout_hash(counts_bytes, size_), static_cast<uint64_t>(size_), server,
                                 device_budget()};
  DeviceBuffer send(api_, sizeof(mine), where());
  DeviceBuffer recv(api_, sizeof(mine) * static_cast<uint64_t>(size_), where());
  device_bytes_.store(send.bytes() + recv.bytes());
  aclError rc = api_.aclrtMemcpy(send.data(), send.bytes(), mine, sizeof(mine), kAclMemcpyHostToDevice);
  if (rc != kAclSuccess) throw_acl_error(api_, "aclrtMemcpy (host to device)", rc, where());
  const std::string op = std::string(collectives_->all_gather_name()) + " (layout check)";
  run_collective(
      op.c_str(),
      [&] { collectives_->all_gather(op.c_str(), send.data(), recv.data(), sizeof(mine), stream_, where()); },
      {&send, &recv}, deadline);
  std::vector<uint64_t> all(kWords * static_cast<size_t>(size_));
  rc = api_.aclrtMemcpy(all.data(), all.size() * sizeof(uint64_t), recv.data(), all.size() * sizeof(uint64_t),
                        kAclMemcpyDeviceToHost);
  if (rc != kAclSuccess) throw_acl_error(api_, "aclrtMemcpy (device to host)", rc, where());
  std::string differing;
  Agreement agreed;
  agreed.servers.resize(size_);
  agreed.budget = mine[3];
  for (int32_t r = 0; r < size_; ++r) {
    if (all[kWords * r] != mine[0] || all[kWords * r + 1] != mine[1]) {
      differing += (differing.empty() ? "" : ", ") + std::to_string(r);
    }
    agreed.servers[r] = all[kWords * r + 2];
    agreed.budget = std::min(agreed.budget, all[kWords * r + 3]);
  }
  if (!differing.empty()) {
    throw_error(NPG_INVALID_USAGE, "ranks disagree on recv_counts: rank(s) " + differing +
                                       " passed a different layout than rank " + std::to_string(rank_) +
                                       "; every rank must pass the same recv_counts");
  }
  return agreed;
}

void DeviceCommunicator::all_gather_v(const npg_segment_t* segments, size_t segment_count, bool write_own, void* recv,
                                      const uint64_t* counts_bytes, const uint64_t* displs_bytes) {
  begin_call();
  struct EndCall {
    DeviceCommunicator* self;
    ~EndCall() { self->end_call(); }
  } end_call_guard{this};

  bind_device();
  const Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(timeout_ms_);
  const Agreement agreed = check_same_layout(counts_bytes, deadline);

  const int32_t n = size_;
  uint64_t max_count = 0;
  for (int32_t r = 0; r < n; ++r) max_count = std::max(max_count, counts_bytes[r]);
  if (max_count == 0) return;
  bool equal = true;
  for (int32_t r = 0; r < n; ++r) equal = equal && counts_bytes[r] == max_count;
  if (!equal && all_gather_v_allowed_ < 0) {
    std::vector<uint64_t> seen;
    std::vector<int32_t> ranks_per_server;
    for (uint64_t s : agreed.servers) {
      size_t i = std::find(seen.begin(), seen.end(), s) - seen.begin();
      if (i == seen.size()) {
        seen.push_back(s);
        ranks_per_server.push_back(0);
      }
      ++ranks_per_server[i];
    }
    const char* soc = api_.aclrtGetSocName != nullptr ? api_.aclrtGetSocName() : nullptr;
    all_gather_v_allowed_ = collectives_->has_all_gather_v() && all_gather_v_topology(soc ? soc : "", ranks_per_server);
  }
  // Ragged without a usable all-gather-v: every block padded to the largest, then trimmed.
  const bool use_v = !equal && all_gather_v_allowed_ == 1;
  if (gather(segments, segment_count, write_own, recv, counts_bytes, displs_bytes, use_v, agreed.budget, deadline)) {
    return;
  }
  all_gather_v_allowed_ = 0;  // refused for this topology, on every rank alike: padded from now on
  gather(segments, segment_count, write_own, recv, counts_bytes, displs_bytes, false, agreed.budget, deadline);
}

namespace {

// Copies bytes [offset, offset + len) of the concatenated segments to the device at dst, through
// staging when there are many small segments.
void copy_range_to_device(const AclApi& api, const npg_segment_t* segments, size_t segment_count, uint64_t offset,
                          uint64_t len, uint8_t* dst, std::vector<uint8_t>* staging, const std::string& where) {
  if (len == 0) return;
  const bool pack = segment_count > kPackSegmentsAbove;
  if (pack) staging->resize(len);
  uint64_t at = 0;  // start of segment i in the concatenation
  for (size_t i = 0; i < segment_count && at < offset + len; ++i) {
    const uint64_t bytes = segments[i].bytes;
    const uint64_t from = std::max(at, offset);
    const uint64_t to = std::min(at + bytes, offset + len);
    if (from < to) {
      const uint8_t* src = static_cast<const uint8_t*>(segments[i].address) + (from - at);
      if (pack) {
        memcpy(staging->data() + (from - offset), src, to - from);
      } else {
        aclError rc =
            api.aclrtMemcpy(dst + (from - offset), len - (from - offset), src, to - from, kAclMemcpyHostToDevice);
        if (rc != kAclSuccess) throw_acl_error(api, "aclrtMemcpy (host to device)", rc, where);
      }
    }
    at += bytes;
  }
  if (pack) {
    aclError rc = api.aclrtMemcpy(dst, len, staging->data(), len, kAclMemcpyHostToDevice);
    if (rc != kAclSuccess) throw_acl_error(api, "aclrtMemcpy (host to device)", rc, where);
  }
}

}  // namespace

bool DeviceCommunicator::gather(const npg_segment_t* segments, size_t segment_count, bool write_own, void* recv,
                                const uint64_t* counts_bytes, const uint64_t* displs_bytes, bool use_v, uint64_t budget,
                                Clock::time_point deadline) {
  const int32_t n = size_;
  uint64_t max_count = 0;
  for (int32_t r = 0; r < n; ++r) max_count = std::max(max_count, counts_bytes[r]);
  if (max_count > UINT64_MAX / (2 * static_cast<uint64_t>(n) + 1)) {
    throw_error(NPG_INVALID_ARGUMENT, "rank_size * largest block overflows 64-bit sizes");
  }
  const RoundPlan plan = plan_rounds(max_count, n, budget, collectives_->max_call_bytes());
  // Bytes of rank r's block in the round starting at offset.
  auto slice = [&](int32_t r, uint64_t offset) {
    return counts_bytes[r] > offset ? std::min(plan.chunk, counts_bytes[r] - offset) : 0;
  };

  DeviceBuffer send(api_, plan.chunk, where());
  uint64_t recv_capacity = static_cast<uint64_t>(n) * plan.chunk;
  if (use_v && plan.rounds == 1) {
    recv_capacity = 0;
    for (int32_t r = 0; r < n; ++r) recv_capacity += counts_bytes[r];
  }
  DeviceBuffer first(api_, recv_capacity, where());
  std::unique_ptr<DeviceBuffer> second;
  if (plan.double_buffered) second.reset(new DeviceBuffer(api_, recv_capacity, where()));
  DeviceBuffer* received[2] = {&first, second ? second.get() : &first};
  device_bytes_.store(send.bytes() + first.bytes() + (second ? second->bytes() : 0));
  std::vector<DeviceBuffer*> buffers = {&send, &first};
  if (second) buffers.push_back(second.get());

  std::vector<uint8_t> staging;
  // Where each rank's slice of a round sits in its receive buffer, per buffer.
  std::vector<uint64_t> offsets[2] = {std::vector<uint64_t>(n), std::vector<uint64_t>(n)};
  std::vector<uint64_t> counts(n);
  uint8_t* out = static_cast<uint8_t*>(recv);
  auto copy_out = [&](uint64_t round) {
    const uint64_t offset = round * plan.chunk;
    const DeviceBuffer& from = *received[round % 2];
    for (int32_t r = 0; r < n; ++r) {
      const uint64_t len = slice(r, offset);
      if (len == 0 || (r == rank_ && !write_own)) continue;
      aclError rc = api_.aclrtMemcpy(out + displs_bytes[r] + offset, len, from.data() + offsets[round % 2][r], len,
                                     kAclMemcpyDeviceToHost);
      if (rc != kAclSuccess) throw_acl_error(api_, "aclrtMemcpy (device to host)", rc, where());
    }
  };

  const char* op = use_v ? collectives_->all_gather_v_name() : collectives_->all_gather_name();
  for (uint64_t round = 0; round < plan.rounds; ++round) {
    const uint64_t offset = round * plan.chunk;
    // Equal and padded blocks: every rank moves the largest block's slice.
    const uint64_t call = std::min(plan.chunk, max_count - offset);
    const uint64_t mine = slice(rank_, offset);
    copy_range_to_device(api_, segments, segment_count, offset, mine, send.data(), &staging, where());
    DeviceBuffer& into = *received[round % 2];
    std::vector<uint64_t>& at = offsets[round % 2];
    uint64_t packed = 0;
    for (int32_t r = 0; r < n; ++r) {
      counts[r] = slice(r, offset);
      at[r] = use_v ? packed : static_cast<uint64_t>(r) * call;
      packed += counts[r];
    }
    bool enqueued = true;
    run_collective(
        op,
        [&] {
          if (use_v) {
            enqueued =
                collectives_->all_gather_v(send.data(), mine, into.data(), counts.data(), at.data(), stream_, where());
          } else {
            collectives_->all_gather(op, send.data(), into.data(), call, stream_, where());
          }
        },
        [&] {
          if (enqueued && round > 0) copy_out(round - 1);
        },
        buffers, deadline);
    if (!enqueued) {
      if (round == 0) return false;
      throw_error(NPG_INTERNAL_ERROR, std::string(op) + " was refused after its first round " + where());
    }
  }
  copy_out(plan.rounds - 1);
  return true;
}

void DeviceCommunicator::close() {
  std::unique_ptr<Error> first;
  auto keep = [&](const Error& e) {
    if (!first) first.reset(new Error(e));
  };
  std::lock_guard<std::mutex> lock(mutex_);
  const bool used_device = claim_.held();
  release_vendor_locked(&first);
  if (stream_ != nullptr || !quarantine_.empty() || used_device) {
    try {
      bind_device();
    } catch (const Error& e) {
      keep(e);
    }
  }
  if (stream_ != nullptr) {
    aclError rc = api_.aclrtDestroyStream(stream_);
    stream_ = nullptr;
    if (rc != kAclSuccess) {
      keep(Error(npg_code_of_acl(rc), acl_error_text(api_, "aclrtDestroyStream", rc, where()),
                 acl_vendor_error(api_, rc)));
    }
  }
  for (void* p : quarantine_) {
    if (p == nullptr) continue;
    aclError rc = api_.aclrtFree(p);
    if (rc != kAclSuccess) {
      keep(Error(npg_code_of_acl(rc), acl_error_text(api_, "aclrtFree", rc, where()), acl_vendor_error(api_, rc)));
    }
  }
  quarantine_.clear();
  if (used_device) {
    // The device's use by this process ends with its one communicator (DeviceClaim).
    const bool force = api_.aclrtResetDeviceForce != nullptr;
    aclError rc = force ? api_.aclrtResetDeviceForce(device_) : api_.aclrtResetDevice(device_);
    device_epoch(device_).fetch_add(1);
    if (rc != kAclSuccess) {
      const char* op = force ? "aclrtResetDeviceForce" : "aclrtResetDevice";
      keep(Error(npg_code_of_acl(rc), acl_error_text(api_, op, rc, where()), acl_vendor_error(api_, rc)));
    }
  }
  claim_.release();
  if (first) throw *first;
}

int32_t parse_device_id(const std::string& text, const std::string& name) {
  char* end = nullptr;
  errno = 0;
  long v = strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || v < 0 || v > INT32_MAX) {
    throw_error(NPG_INVALID_ARGUMENT, name + "=\"" + text + "\" is not a device id (a non-negative integer)");
  }
  return static_cast<int32_t>(v);
}

int32_t bind_root_device(const AclApi& api, const std::string& device_text) {
  int32_t device = -1;
  int32_t current = -1;
  const bool has_current = api.aclrtGetDevice(&current) == kAclSuccess && current >= 0;
  if (!device_text.empty()) {
    device = parse_device_id(device_text, "bind_address device");
  } else if (has_current) {
    device = current;
  } else {
    const char* env = getenv("NPUGATHER_DEVICE_ID");
    device = env != nullptr && env[0] != '\0' ? parse_device_id(env, "NPUGATHER_DEVICE_ID") : 0;
  }
  if (!has_current || current != device) {
    aclError rc = api.aclrtSetDevice(device);
    if (rc != kAclSuccess) throw_acl_error(api, "aclrtSetDevice", rc, "(device " + std::to_string(device) + ")");
  }
  return device;
}

}  // namespace cann
}  // namespace npg

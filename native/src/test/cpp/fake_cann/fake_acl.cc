// Simulated libascendcl.so: devices, streams (one worker thread each) and "device" memory
// in host memory. Test-only; see fake_cann.h.
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "fake_cann.h"

namespace fake_cann {
namespace {

thread_local int tls_device = -1;
thread_local std::string tls_recent_error;

std::mutex g_mutex;
struct Allocation {
  size_t bytes;
  int device;
};
std::map<uintptr_t, Allocation>* g_allocations = new std::map<uintptr_t, Allocation>();
std::map<int, long long>* g_device_used = new std::map<int, long long>();  // live bytes per device
std::map<int, long long>* g_device_peak = new std::map<int, long long>();
int g_streams = 0;
int g_comms = 0;
long long g_device_bytes = 0;
bool g_hccl_env_latched = false;
int g_hccl_connect_s = 0;
int g_hccl_exec_s = 0;
int g_device_resets = 0;
int g_error_reports = 0;  // what the real runtime would log at ERROR and report (see sync_stream)
bool g_initialized = false;

int device_count() {
  const char* v = getenv("NPUGATHER_FAKE_CANN_DEVICE_COUNT");
  return v ? atoi(v) : 8;
}

// NPUGATHER_FAKE_CANN_DEVICE_MEMORY bytes per device (default 64 GiB, an Atlas A2's HBM).
long long device_capacity() {
  const char* v = getenv("NPUGATHER_FAKE_CANN_DEVICE_MEMORY");
  return v != nullptr ? atoll(v) : 64ll << 30;
}

int fail(int code, const std::string& text) {
  tls_recent_error = "simulated CANN: " + text;
  return code;
}

struct Stream {
  std::mutex mutex;
  std::condition_variable cv;
  std::deque<Task> queue;
  bool running = false;
  int error = kAclSuccess;  // first failure of a task since the last synchronize
  std::atomic<bool> cancelled{false};
  std::thread worker;

  void run() {
    std::unique_lock<std::mutex> lock(mutex);
    for (;;) {
      cv.wait(lock, [&] { return cancelled.load() || !queue.empty(); });
      if (cancelled.load()) break;
      Task task = std::move(queue.front());
      queue.pop_front();
      running = true;
      lock.unlock();
      int rc = error == kAclSuccess ? task(cancelled) : kAclSuccess;  // a failed stream skips later tasks
      lock.lock();
      running = false;
      if (rc != kAclSuccess && error == kAclSuccess) error = rc;
      cv.notify_all();
    }
    queue.clear();
    running = false;
    cv.notify_all();
  }
};

}  // namespace

int enqueue(void* stream, Task task) {
  if (stream == nullptr) return fail(kAclErrorInvalidParam, "stream is NULL");
  Stream* s = static_cast<Stream*>(stream);
  std::lock_guard<std::mutex> lock(s->mutex);
  s->queue.push_back(std::move(task));
  s->cv.notify_all();
  return kAclSuccess;
}

bool is_device_range(const void* p, size_t bytes) {
  std::lock_guard<std::mutex> lock(g_mutex);
  uintptr_t a = reinterpret_cast<uintptr_t>(p);
  auto it = g_allocations->upper_bound(a);
  if (it == g_allocations->begin()) return false;
  --it;
  const size_t size = it->second.bytes;
  return a >= it->first && a - it->first <= size && bytes <= size - (a - it->first);
}

int current_device() { return tls_device; }

void set_recent_error(const char* text) { tls_recent_error = text; }

void latch_hccl_env() {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_hccl_env_latched) return;
  g_hccl_env_latched = true;
  const char* connect = getenv("HCCL_CONNECT_TIMEOUT");
  const char* exec = getenv("HCCL_EXEC_TIMEOUT");
  g_hccl_connect_s = connect != nullptr ? atoi(connect) : 120;
  g_hccl_exec_s = exec != nullptr ? atoi(exec) : 1836;
}

void count_comms(int delta) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_comms += delta;
}

}  // namespace fake_cann

using namespace fake_cann;

extern "C" {

FAKE_CANN_EXPORT int aclInit(const char*) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_initialized) return fail(kAclErrorRepeatInitialize, "aclInit: repeat initialize");
  g_initialized = true;
  return kAclSuccess;
}

FAKE_CANN_EXPORT int aclFinalize() { return kAclSuccess; }

FAKE_CANN_EXPORT int aclrtSetDevice(int32_t device_id) {
  if (device_id < 0 || device_id >= device_count()) {
    return fail(kAclErrorRtInvalidDeviceId, "device " + std::to_string(device_id) + " does not exist");
  }
  tls_device = device_id;
  return kAclSuccess;
}

FAKE_CANN_EXPORT int aclrtResetDevice(int32_t device_id) {
  if (device_id < 0 || device_id >= device_count()) {
    return fail(kAclErrorRtInvalidDeviceId, "device " + std::to_string(device_id) + " does not exist");
  }
  if (tls_device == device_id) tls_device = -1;
  std::lock_guard<std::mutex> lock(g_mutex);
  ++g_device_resets;
  return kAclSuccess;
}

#ifndef FAKE_CANN_MINIMAL
FAKE_CANN_EXPORT int aclrtResetDeviceForce(int32_t device_id) { return aclrtResetDevice(device_id); }
#endif

FAKE_CANN_EXPORT int aclrtGetDevice(int32_t* device_id) {
  if (device_id == nullptr) return fail(kAclErrorInvalidParam, "deviceId is NULL");
  if (tls_device < 0) return fail(kAclErrorRtContextNull, "no device set on this thread");
  *device_id = tls_device;
  return kAclSuccess;
}

#ifndef FAKE_CANN_MINIMAL
FAKE_CANN_EXPORT const char* aclrtGetSocName() {
  const char* soc = getenv("NPUGATHER_FAKE_CANN_SOC");
  return soc != nullptr ? soc : "Ascend910B1";
}
#endif

FAKE_CANN_EXPORT int aclrtGetDeviceCount(uint32_t* count) {
  *count = static_cast<uint32_t>(device_count());
  return kAclSuccess;
}

FAKE_CANN_EXPORT int aclrtCreateStream(void** stream) {
  if (tls_device < 0) return fail(kAclErrorRtContextNull, "aclrtCreateStream without aclrtSetDevice on this thread");
  Stream* s = new Stream();
  s->worker = std::thread([s] { s->run(); });
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    ++g_streams;
  }
  *stream = s;
  return kAclSuccess;
}

static void destroy_stream(Stream* s) {
  {
    std::lock_guard<std::mutex> lock(s->mutex);
    s->cancelled.store(true);
    s->cv.notify_all();
  }
  s->worker.join();
  delete s;
  std::lock_guard<std::mutex> lock(g_mutex);
  --g_streams;
}

// A stream with pending work is refused: the caller must synchronize it, or force it.
FAKE_CANN_EXPORT int aclrtDestroyStream(void* stream) {
  if (stream == nullptr) return fail(kAclErrorInvalidParam, "stream is NULL");
  Stream* s = static_cast<Stream*>(stream);
  {
    std::lock_guard<std::mutex> lock(s->mutex);
    if (!s->queue.empty() || s->running) {
      return fail(kAclErrorRtInternal,
                  "aclrtDestroyStream: the stream has pending tasks (synchronize it first, or "
                  "aclrtDestroyStreamForce)");
    }
  }
  destroy_stream(s);
  return kAclSuccess;
}

#ifndef FAKE_CANN_MINIMAL
// Discards the stream's queued tasks and cancels the running one.
FAKE_CANN_EXPORT int aclrtDestroyStreamForce(void* stream) {
  if (stream == nullptr) return fail(kAclErrorInvalidParam, "stream is NULL");
  destroy_stream(static_cast<Stream*>(stream));
  return kAclSuccess;
}
#endif

static int sync_stream(void* stream, int32_t timeout_ms) {
  if (stream == nullptr) return fail(kAclErrorInvalidParam, "stream is NULL");
  if (tls_device < 0) return fail(kAclErrorRtContextNull, "stream synchronize without aclrtSetDevice on this thread");
  Stream* s = static_cast<Stream*>(stream);
  std::unique_lock<std::mutex> lock(s->mutex);
  auto idle = [&] { return (s->queue.empty() && !s->running) || s->cancelled.load(); };
  if (timeout_ms < 0) {
    s->cv.wait(lock, idle);
  } else if (!s->cv.wait_for(lock, std::chrono::milliseconds(timeout_ms), idle)) {
    // As in the real runtime (Stream::SynchronizeExecutedTask, ApiImpl::StreamSynchronize):
    // every expired wait logs at ERROR and reports an error message.
    std::lock_guard<std::mutex> count(g_mutex);
    ++g_error_reports;
    return fail(kAclErrorRtStreamSyncTimeout, "Stream synchronize timeout");
  }
  int rc = s->error;
  s->error = kAclSuccess;
  if (rc != kAclSuccess) return fail(rc, "a task on the stream failed");
  return kAclSuccess;
}

FAKE_CANN_EXPORT int aclrtSynchronizeStream(void* stream) { return sync_stream(stream, -1); }

#ifndef FAKE_CANN_MINIMAL
FAKE_CANN_EXPORT int aclrtSynchronizeStreamWithTimeout(void* stream, int32_t timeout_ms) {
  return sync_stream(stream, timeout_ms);
}

FAKE_CANN_EXPORT const char* aclGetRecentErrMsg() { return tls_recent_error.c_str(); }

// As in the real runtime (ApiImpl::StreamQuery, rtStreamQuery): whether the stream's tasks are
// done, silently; a failed task's error is left for the next synchronize.
FAKE_CANN_EXPORT int aclrtStreamQuery(void* stream, int* status) {
  if (stream == nullptr || status == nullptr) return fail(kAclErrorInvalidParam, "aclrtStreamQuery: NULL");
  if (tls_device < 0) return fail(kAclErrorRtContextNull, "aclrtStreamQuery without aclrtSetDevice on this thread");
  Stream* s = static_cast<Stream*>(stream);
  std::lock_guard<std::mutex> lock(s->mutex);
  *status =
      (s->queue.empty() && !s->running) || s->cancelled.load() ? kAclStreamStatusComplete : kAclStreamStatusNotReady;
  return kAclSuccess;
}
#endif

// As on a device, memory is finite: an allocation past the device's capacity fails with
// ACL_ERROR_RT_MEMORY_ALLOCATION and allocates nothing.
FAKE_CANN_EXPORT int aclrtMalloc(void** ptr, size_t size, int /*policy*/) {
  if (tls_device < 0) return fail(kAclErrorRtContextNull, "aclrtMalloc without aclrtSetDevice on this thread");
  if (ptr == nullptr || size == 0) return fail(kAclErrorInvalidParam, "aclrtMalloc: NULL pointer or size 0");
  const long long capacity = device_capacity();
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    const long long used = (*g_device_used)[tls_device];
    if (size > static_cast<unsigned long long>(capacity - used)) {
      return fail(kAclErrorRtMemoryAllocation, "out of device memory: " + std::to_string(size) + " bytes asked, " +
                                                   std::to_string(capacity - used) + " of " + std::to_string(capacity) +
                                                   " free on device " + std::to_string(tls_device));
    }
    (*g_device_used)[tls_device] += static_cast<long long>(size);  // reserved before the host malloc
  }
  void* p = malloc(size);
  std::lock_guard<std::mutex> lock(g_mutex);
  if (p == nullptr) {
    (*g_device_used)[tls_device] -= static_cast<long long>(size);
    return fail(kAclErrorRtMemoryAllocation, "out of simulated device memory (host malloc failed)");
  }
  (*g_allocations)[reinterpret_cast<uintptr_t>(p)] = Allocation{size, tls_device};
  g_device_bytes += static_cast<long long>(size);
  long long& peak = (*g_device_peak)[tls_device];
  peak = std::max(peak, (*g_device_used)[tls_device]);
  *ptr = p;
  return kAclSuccess;
}

FAKE_CANN_EXPORT int aclrtFree(void* ptr) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_allocations->find(reinterpret_cast<uintptr_t>(ptr));
  if (it == g_allocations->end()) return fail(kAclErrorRtParamInvalid, "aclrtFree of a pointer not from aclrtMalloc");
  g_device_bytes -= static_cast<long long>(it->second.bytes);
  (*g_device_used)[it->second.device] -= static_cast<long long>(it->second.bytes);
  g_allocations->erase(it);
  free(ptr);
  return kAclSuccess;
}

#ifndef FAKE_CANN_MINIMAL
// Free and total memory of the current device (the attribute is not told apart).
FAKE_CANN_EXPORT int aclrtGetMemInfo(int /*attr*/, size_t* free_bytes, size_t* total_bytes) {
  if (tls_device < 0) return fail(kAclErrorRtContextNull, "aclrtGetMemInfo without aclrtSetDevice on this thread");
  if (free_bytes == nullptr || total_bytes == nullptr) return fail(kAclErrorInvalidParam, "aclrtGetMemInfo: NULL");
  const long long capacity = device_capacity();
  std::lock_guard<std::mutex> lock(g_mutex);
  *total_bytes = static_cast<size_t>(capacity);
  *free_bytes = static_cast<size_t>(std::max(0ll, capacity - (*g_device_used)[tls_device]));
  return kAclSuccess;
}
#endif

FAKE_CANN_EXPORT int aclrtMemcpy(void* dst, size_t dest_max, const void* src, size_t count, int kind) {
  if (tls_device < 0) return fail(kAclErrorRtContextNull, "aclrtMemcpy without aclrtSetDevice on this thread");
  if (count > dest_max) return fail(kAclErrorInvalidParam, "aclrtMemcpy: count > destMax");
  if (count == 0) return kAclSuccess;
  if (dst == nullptr || src == nullptr) return fail(kAclErrorInvalidParam, "aclrtMemcpy: NULL pointer");
  const bool dst_dev = is_device_range(dst, dest_max);
  const bool src_dev = is_device_range(src, count);
  bool ok = true;
  switch (kind) {
    case 0:
      ok = !dst_dev && !src_dev;
      break;  // host to host
    case 1:
      ok = dst_dev && !src_dev;
      break;  // host to device
    case 2:
      ok = !dst_dev && src_dev;
      break;  // device to host
    case 3:
      ok = dst_dev && src_dev;
      break;  // device to device
    default:
      ok = false;
  }
  if (!ok) return fail(kAclErrorInvalidParam, "aclrtMemcpy: pointers do not match kind " + std::to_string(kind));
  memmove(dst, src, count);
  return kAclSuccess;
}

FAKE_CANN_EXPORT int npgFakeCannLiveAllocations() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return static_cast<int>(g_allocations->size());
}

FAKE_CANN_EXPORT long long npgFakeCannLiveDeviceBytes() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_device_bytes;
}

FAKE_CANN_EXPORT long long npgFakeCannPeakDeviceBytes(int device) {
  std::lock_guard<std::mutex> lock(g_mutex);
  return (*g_device_peak)[device];
}

FAKE_CANN_EXPORT void npgFakeCannResetPeakDeviceBytes() {
  std::lock_guard<std::mutex> lock(g_mutex);
  for (auto& e : *g_device_peak) e.second = (*g_device_used)[e.first];
}

FAKE_CANN_EXPORT int npgFakeCannErrorReports() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_error_reports;
}

FAKE_CANN_EXPORT int npgFakeCannDeviceResets() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_device_resets;
}

FAKE_CANN_EXPORT bool npgFakeCannHcclTimeouts(int* connect_s, int* exec_s) {
  std::lock_guard<std::mutex> lock(g_mutex);
  *connect_s = g_hccl_connect_s;
  *exec_s = g_hccl_exec_s;
  return g_hccl_env_latched;
}

FAKE_CANN_EXPORT int npgFakeCannLiveComms() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_comms;
}

FAKE_CANN_EXPORT int npgFakeCannLiveStreams() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_streams;
}

}  // extern "C"

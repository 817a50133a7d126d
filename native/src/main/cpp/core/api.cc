// The exported C functions. Every entry point runs through guarded(): no C++
// exception leaves this file, and the last error names the operation and rank.
#include <string.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend.h"
#include "communicator.h"
#include "error.h"
#include "huge_pages.h"
#include "npugather.h"

namespace {
std::atomic<int64_t> live_comms{0};
}  // namespace

// Counted from creation to deletion, whether or not the backend's init succeeded.
struct npg_comm {
  npg_comm() { live_comms.fetch_add(1); }
  ~npg_comm() { live_comms.fetch_sub(1); }
  npg_comm(const npg_comm&) = delete;
  npg_comm& operator=(const npg_comm&) = delete;
  std::unique_ptr<npg::Communicator> impl;
};

namespace npg {
namespace {

constexpr size_t kMaxCommDomainChars = 128;

// Every communicator npg_comm_init made and npg_comm_destroy has not released, with the
// number of calls running on it. A handle is a number, never reused, that is looked up
// here before anything is read through it: a destroyed, foreign or NULL handle is an
// error instead of a crash, and a destroy while another thread is inside a call on the
// same communicator is refused.
class LiveHandles {
 public:
  npg_comm_t add(std::unique_ptr<npg_comm> comm) {
    std::lock_guard<std::mutex> lock(mutex_);
    uintptr_t id = next_id_;
    next_id_ += 16;
    entries_[id] = Entry{std::move(comm), 0};
    return reinterpret_cast<npg_comm_t>(id);
  }
  // The communicator (its call counted) or null when handle is not live.
  npg_comm* enter(npg_comm_t handle) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = entries_.find(reinterpret_cast<uintptr_t>(handle));
    if (it == entries_.end()) return nullptr;
    ++it->second.calls;
    return it->second.comm.get();
  }
  void leave(npg_comm_t handle) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = entries_.find(reinterpret_cast<uintptr_t>(handle));
    if (it != entries_.end()) --it->second.calls;
  }
  // Takes the communicator out unless calls other than the caller's own run on it;
  // *others is their number.
  std::unique_ptr<npg_comm> remove_if_idle(npg_comm_t handle, int64_t* others) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = entries_.find(reinterpret_cast<uintptr_t>(handle));
    *others = it == entries_.end() ? 0 : it->second.calls - 1;
    if (it == entries_.end() || *others != 0) return nullptr;
    std::unique_ptr<npg_comm> comm = std::move(it->second.comm);
    entries_.erase(it);
    return comm;
  }

 private:
  struct Entry {
    std::unique_ptr<npg_comm> comm;
    int64_t calls = 0;
  };
  std::mutex mutex_;
  uintptr_t next_id_ = 0x1000;
  std::unordered_map<uintptr_t, Entry> entries_;
};

LiveHandles& live_handles() {
  static LiveHandles* handles = new LiveHandles();  // never destroyed: calls may outlive static destruction
  return *handles;
}

// One call on a handle: resolves it, and counts the call so that a concurrent destroy
// cannot free the communicator underneath.
class HandleCall {
 public:
  explicit HandleCall(npg_comm_t handle) noexcept : handle_(handle) {
    comm_ = handle != nullptr ? live_handles().enter(handle) : nullptr;
    if (comm_ != nullptr) {
      rank = comm_->impl->rank();
      size = comm_->impl->size();
    }
  }
  ~HandleCall() {
    if (comm_ != nullptr) live_handles().leave(handle_);
  }
  HandleCall(const HandleCall&) = delete;
  HandleCall& operator=(const HandleCall&) = delete;

  Communicator& get() const {
    if (handle_ == nullptr) throw_error(NPG_INVALID_ARGUMENT, "comm is NULL");
    if (comm_ == nullptr) {
      throw_error(NPG_INVALID_USAGE,
                  "comm is not a live communicator: it was destroyed already or never "
                  "returned by npg_comm_init");
    }
    return *comm_->impl;
  }

  int64_t rank = -1;
  int64_t size = -1;

 private:
  npg_comm_t handle_;
  npg_comm* comm_;
};

std::string context_of(const char* op, int64_t rank, int64_t size) {
  if (rank < 0 && size < 0) return op;
  return std::string(op) + "(rank " + std::to_string(rank) + "/" + std::to_string(size) + ")";
}

template <typename Fn>
npg_result_t guarded(const char* op, const int64_t& rank, const int64_t& size, Fn&& fn) noexcept {
  npg_result_t code = NPG_INTERNAL_ERROR;
  std::string text;
  VendorError vendor;
  try {
    fn();
    clear_last_error();
    return NPG_SUCCESS;
  } catch (const Error& e) {
    code = e.code();
    try {
      text = e.what();
      vendor = e.vendor();
      if (!vendor.library.empty() && vendor.rank < 0) vendor.rank = static_cast<int32_t>(rank);
    } catch (...) {
    }
  } catch (const std::bad_alloc&) {
    code = NPG_SYSTEM_ERROR;
    text = "out of memory";
  } catch (const std::exception& e) {
    code = NPG_INTERNAL_ERROR;
    try {
      text = std::string("unexpected exception: ") + e.what();
    } catch (...) {
    }
  } catch (...) {
    code = NPG_INTERNAL_ERROR;
    text = "unexpected non-standard exception";
  }
  try {
    set_last_error(context_of(op, rank, size) + ": " + text, vendor);
  } catch (...) {
    set_last_error(op);
  }
  return code;
}

void check_arg(bool ok, const std::string& text) {
  if (!ok) throw_error(NPG_INVALID_ARGUMENT, text);
}

// For the checks every collective runs: the error text is built only when the check fails.
template <typename Text>
void check_arg_lazily(bool ok, Text&& text) {
  if (!ok) throw_error(NPG_INVALID_ARGUMENT, text());
}

size_t checked_width(npg_dtype_t dtype) {
  size_t width = npg_dtype_size(dtype);
  check_arg_lazily(width != 0, [&] {
    return "dtype " + std::to_string(static_cast<int>(dtype)) +
           " is not a known dtype; allowed values: 0 (int8), 1 (int16), 2 (int32), "
           "3 (float16), 4 (float32), 5 (int64), 7 (uint8), 11 (bfloat16)";
  });
  return width;
}

// name[r] = elements.
uint64_t to_bytes(uint64_t elements, size_t width, const char* name, int32_t r) {
  check_arg_lazily(elements <= UINT64_MAX / width, [&] {
    return std::string(name) + "[" + std::to_string(r) + "] = " + std::to_string(elements) +
           " elements overflows 64-bit byte sizes";
  });
  return elements * width;
}

// Validates the gather layout and turns it into byte counts and displacements. The block
// of skip_rank (if >= 0) is not received, so it needs no room in recv.
void check_layout(const Communicator& c, void* recv, const uint64_t* counts, const uint64_t* displs, size_t width,
                  int32_t skip_rank, std::vector<uint64_t>* counts_bytes, std::vector<uint64_t>* displs_bytes) {
  const int32_t n = c.size();
  counts_bytes->resize(n);
  displs_bytes->resize(n);
  uint64_t total = 0;
  for (int32_t r = 0; r < n; ++r) {
    (*counts_bytes)[r] = to_bytes(counts[r], width, "recv_counts", r);
    (*displs_bytes)[r] = to_bytes(displs[r], width, "recv_displs", r);
    check_arg_lazily((*displs_bytes)[r] <= UINT64_MAX - (*counts_bytes)[r], [&] {
      const std::string idx = "[" + std::to_string(r) + "]";
      return "recv_displs" + idx + " + recv_counts" + idx + " overflows 64-bit byte offsets";
    });
    if ((*counts_bytes)[r] > 0 && r != skip_rank) {
      check_arg(UINT64_MAX - total >= (*counts_bytes)[r], "sum of recv_counts overflows 64-bit byte sizes");
      total += (*counts_bytes)[r];
    }
  }
  check_arg_lazily(recv != nullptr || total == 0,
                   [&] { return "recv is NULL but the receive counts sum to " + std::to_string(total) + " bytes"; });
  check_arg(reinterpret_cast<uintptr_t>(recv) <= UINTPTR_MAX - total || total == 0,
            "recv + receive size overflows the address space");
  // Receive regions of different ranks must not overlap (empty blocks are exempt).
  std::vector<int32_t> order;
  for (int32_t r = 0; r < n; ++r)
    if ((*counts_bytes)[r] > 0 && r != skip_rank) order.push_back(r);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return (*displs_bytes)[a] < (*displs_bytes)[b]; });
  for (size_t i = 1; i < order.size(); ++i) {
    int32_t a = order[i - 1];
    int32_t b = order[i];
    check_arg_lazily((*displs_bytes)[a] + (*counts_bytes)[a] <= (*displs_bytes)[b], [&] {
      return "recv_displs[" + std::to_string(b) + "] = " + std::to_string(displs[b]) + " makes rank " +
             std::to_string(b) + "'s block overlap rank " + std::to_string(a) + "'s block [" +
             std::to_string(displs[a]) + ", " + std::to_string(displs[a] + counts[a]) + ")";
    });
  }
}

// A send region [s, s + bytes) (name, or name[index] when index >= 0) may not overlap another
// rank's receive block; it may be this rank's own block exactly when own_block_allowed (in place).
void check_send_region(const Communicator& c, uintptr_t s, uint64_t bytes, const void* recv,
                       const std::vector<uint64_t>& counts_bytes, const std::vector<uint64_t>& displs_bytes,
                       bool own_block_allowed, const char* name, int64_t index = -1) {
  if (bytes == 0 || recv == nullptr) return;
  const int32_t me = c.rank();
  auto rb = reinterpret_cast<uintptr_t>(recv);
  if (own_block_allowed && s == rb + displs_bytes[me]) return;
  for (int32_t r = 0; r < c.size(); ++r) {
    if (counts_bytes[r] == 0 || (r == me && !own_block_allowed)) continue;
    uint64_t lo = rb + displs_bytes[r];
    uint64_t hi = lo + counts_bytes[r];
    if (s < hi && s + bytes > lo) {
      const std::string which = index < 0 ? name : std::string(name) + "[" + std::to_string(index) + "]";
      throw_error(NPG_INVALID_USAGE, which + " overlaps rank " + std::to_string(r) +
                                         "'s receive block; in place requires send == recv + recv_displs[" +
                                         std::to_string(me) + "] * width");
    }
  }
}

// A collective's arguments, checked and in bytes.
struct Prepared {
  std::vector<uint64_t> counts_bytes;
  std::vector<uint64_t> displs_bytes;
  std::vector<npg_segment_t> segments;
  bool write_own = false;
};

// The classic single-buffer send: one segment, own block copied unless in place.
Prepared prepare_from_buffer(const Communicator& c, const void* send, uint64_t send_count, void* recv,
                             const uint64_t* counts, const uint64_t* displs, size_t width) {
  Prepared p;
  check_layout(c, recv, counts, displs, width, -1, &p.counts_bytes, &p.displs_bytes);
  const int32_t me = c.rank();
  check_arg_lazily(send_count == counts[me], [&] {
    return "send_count " + std::to_string(send_count) + " must equal recv_counts[" + std::to_string(me) +
           "] = " + std::to_string(counts[me]);
  });
  check_arg_lazily(send != nullptr || send_count == 0,
                   [&] { return "send is NULL but send_count is " + std::to_string(send_count); });
  const uint64_t bytes = p.counts_bytes[me];
  check_send_region(c, reinterpret_cast<uintptr_t>(send), bytes, recv, p.counts_bytes, p.displs_bytes, true, "send");
  p.write_own =
      bytes != 0 && reinterpret_cast<uintptr_t>(send) != reinterpret_cast<uintptr_t>(recv) + p.displs_bytes[me];
  p.segments.push_back(npg_segment_t{send, bytes});
  return p;
}

// Checks this rank's arguments (prepare throws on a bad one), then runs the collective. A
// rank that rejects its arguments still takes part where its backend can tell the peers,
// which are in or about to enter the same collective: every rank then fails at once with the
// same INVALID_USAGE naming this rank and its error, instead of its peers timing out.
template <typename Prepare>
void collective(Communicator& c, void* recv, Prepare&& prepare) {
  Prepared p;
  try {
    p = prepare();
  } catch (const Error& local) {
    if (local.code() != NPG_INVALID_ARGUMENT && local.code() != NPG_INVALID_USAGE) throw;
    try {
      c.reject(local.what());
    } catch (const Error& shared) {
      if (shared.code() == NPG_INVALID_USAGE) throw;  // the verdict every rank raises
    }
    throw;  // peers could not be told: this rank's own error
  }
  c.all_gather_v(p.segments.data(), p.segments.size(), p.write_own, recv, p.counts_bytes.data(), p.displs_bytes.data());
}

}  // namespace
}  // namespace npg

using npg::check_arg;
using npg::check_arg_lazily;
using npg::guarded;
using npg::HandleCall;

extern "C" {

npg_result_t npg_get_root_info(const char* backend, const char* bind_address, void* root_info, size_t capacity,
                               size_t* root_info_size) {
  return guarded("npg_get_root_info", -1, -1, [&] {
    check_arg(root_info != nullptr, "root_info is NULL");
    check_arg(root_info_size != nullptr, "root_info_size is NULL");
    check_arg(capacity > 0 && capacity <= NPG_ROOT_INFO_MAX_BYTES, "capacity " + std::to_string(capacity) +
                                                                       " is out of range [1, " +
                                                                       std::to_string(NPG_ROOT_INFO_MAX_BYTES) + "]");
    *root_info_size = 0;
    const npg::Backend& b = npg::find_backend(backend);
    *root_info_size = b.get_root_info(bind_address, root_info, capacity);
  });
}

npg_result_t npg_release_root_info(const char* backend, const void* root_info, size_t root_info_size) {
  return guarded("npg_release_root_info", -1, -1, [&] {
    check_arg(root_info != nullptr, "root_info is NULL");
    npg::find_backend(backend).release_root_info(root_info, root_info_size);
  });
}

npg_result_t npg_comm_init(const char* backend, int32_t rank, int32_t rank_size, int32_t rank_root,
                           const char* comm_domain, int32_t comm_mode, int32_t device_id, const char* rank_table_file,
                           int64_t timeout_ms, uint32_t flags, const void* root_info, size_t root_info_size,
                           npg_comm_t* comm) {
  return guarded("npg_comm_init", rank, rank_size, [&] {
    check_arg(comm != nullptr, "comm is NULL");
    *comm = nullptr;
    check_arg(
        rank_size >= 1 && rank_size <= NPG_MAX_RANK_SIZE,
        "rank_size " + std::to_string(rank_size) + " is out of range [1, " + std::to_string(NPG_MAX_RANK_SIZE) + "]");
    check_arg(rank >= 0 && rank < rank_size,
              "rank " + std::to_string(rank) + " is out of range [0, " + std::to_string(rank_size - 1) + "]");
    check_arg(rank_root >= 0 && rank_root < rank_size,
              "rank_root " + std::to_string(rank_root) + " is out of range [0, " + std::to_string(rank_size - 1) + "]");
    size_t domain_len = comm_domain ? strnlen(comm_domain, npg::kMaxCommDomainChars + 1) : 0;
    check_arg(domain_len <= npg::kMaxCommDomainChars,
              "comm_domain is longer than " + std::to_string(npg::kMaxCommDomainChars) + " bytes (UTF-8)");
    check_arg(comm_mode == NPG_COMM_MULTI_PROCESS || comm_mode == NPG_COMM_MULTI_THREAD,
              "comm_mode " + std::to_string(comm_mode) + " is not one of 0 (multi-process), 1 (multi-thread)");
    check_arg(timeout_ms > 0, "timeout_ms " + std::to_string(timeout_ms) + " is out of range [1, 2^63-1]");
    const uint32_t known_flags =
        NPG_FLAG_FORCE_TCP | NPG_FLAG_FORCE_STAGING | NPG_FLAG_FORCE_RING | NPG_FLAG_FORCE_LOG_N;
    check_arg((flags & ~known_flags) == 0, "flags " + std::to_string(flags) +
                                               " has unknown bits; allowed: NPG_FLAG_FORCE_TCP (0x1), "
                                               "NPG_FLAG_FORCE_STAGING (0x2), NPG_FLAG_FORCE_RING (0x4), "
                                               "NPG_FLAG_FORCE_LOG_N (0x8)");
    check_arg((flags & NPG_FLAG_FORCE_RING) == 0 || (flags & NPG_FLAG_FORCE_LOG_N) == 0,
              "flags " + std::to_string(flags) + " set both NPG_FLAG_FORCE_RING and NPG_FLAG_FORCE_LOG_N");
    // root_info may be NULL where the backend needs none (a rank table for hccl, a domain for lccl).
    const npg::Backend& b = npg::find_backend(backend);
    npg::CommConfig config;
    config.rank = rank;
    config.rank_size = rank_size;
    config.rank_root = rank_root;
    config.comm_domain = comm_domain ? std::string(comm_domain, domain_len) : std::string();
    config.comm_mode = comm_mode;
    config.device_id = device_id;
    config.rank_table_file = rank_table_file ? rank_table_file : "";
    config.timeout_ms = timeout_ms;
    config.flags = flags;
    config.root_info = root_info;
    config.root_info_size = root_info_size;
    auto handle = std::make_unique<npg_comm>();
    handle->impl = b.create_communicator(config);
    *comm = npg::live_handles().add(std::move(handle));
  });
}

npg_result_t npg_all_gather(npg_comm_t comm, const void* send, void* recv, uint64_t count, npg_dtype_t dtype) {
  HandleCall call(comm);
  return guarded("npg_all_gather", call.rank, call.size, [&] {
    npg::Communicator& c = call.get();
    npg::collective(c, recv, [&] {
      size_t width = npg::checked_width(dtype);
      std::vector<uint64_t> counts(c.size(), count);
      std::vector<uint64_t> displs(c.size());
      for (int32_t r = 0; r < c.size(); ++r) {
        check_arg_lazily(r == 0 || count <= UINT64_MAX / static_cast<uint64_t>(r),
                         [&] { return "count " + std::to_string(count) + " times rank_size overflows 64-bit sizes"; });
        displs[r] = count * static_cast<uint64_t>(r);
      }
      return npg::prepare_from_buffer(c, send, count, recv, counts.data(), displs.data(), width);
    });
  });
}

npg_result_t npg_all_gather_v(npg_comm_t comm, const void* send, uint64_t send_count, void* recv,
                              const uint64_t* recv_counts, const uint64_t* recv_displs, npg_dtype_t dtype) {
  HandleCall call(comm);
  return guarded("npg_all_gather_v", call.rank, call.size, [&] {
    npg::Communicator& c = call.get();
    npg::collective(c, recv, [&] {
      check_arg(recv_counts != nullptr, "recv_counts is NULL");
      check_arg(recv_displs != nullptr, "recv_displs is NULL");
      size_t width = npg::checked_width(dtype);
      return npg::prepare_from_buffer(c, send, send_count, recv, recv_counts, recv_displs, width);
    });
  });
}

npg_result_t npg_all_gather_v_segments(npg_comm_t comm, const npg_segment_t* send_segments, size_t segment_count,
                                       void* recv, const uint64_t* recv_counts, const uint64_t* recv_displs) {
  HandleCall call(comm);
  return guarded("npg_all_gather_v_segments", call.rank, call.size, [&] {
    npg::Communicator& c = call.get();
    npg::collective(c, recv, [&] {
      check_arg(recv_counts != nullptr, "recv_counts is NULL");
      check_arg(recv_displs != nullptr, "recv_displs is NULL");
      check_arg_lazily(segment_count <= NPG_MAX_SEGMENTS, [&] {
        return "segment_count " + std::to_string(segment_count) + " is out of range [0, " +
               std::to_string(NPG_MAX_SEGMENTS) + "]";
      });
      check_arg_lazily(send_segments != nullptr || segment_count == 0,
                       [&] { return "send_segments is NULL but segment_count is " + std::to_string(segment_count); });
      npg::Prepared p;
      npg::check_layout(c, recv, recv_counts, recv_displs, 1, c.rank(), &p.counts_bytes, &p.displs_bytes);
      uint64_t total = 0;
      for (size_t i = 0; i < segment_count; ++i) {
        const npg_segment_t& seg = send_segments[i];
        check_arg_lazily(seg.address != nullptr || seg.bytes == 0, [&] {
          return "send_segments[" + std::to_string(i) + "].address is NULL but its bytes is " +
                 std::to_string(seg.bytes);
        });
        check_arg_lazily(seg.bytes <= UINT64_MAX - total,
                         [] { return std::string("sum of send_segments' bytes overflows 64-bit sizes"); });
        total += seg.bytes;
        npg::check_send_region(c, reinterpret_cast<uintptr_t>(seg.address), seg.bytes, recv, p.counts_bytes,
                               p.displs_bytes, false, "send_segments", static_cast<int64_t>(i));
      }
      check_arg_lazily(total == p.counts_bytes[c.rank()], [&] {
        return "send_segments hold " + std::to_string(total) + " bytes but recv_counts[" + std::to_string(c.rank()) +
               "] = " + std::to_string(p.counts_bytes[c.rank()]);
      });
      p.segments.assign(send_segments, send_segments + segment_count);
      p.write_own = false;
      return p;
    });
  });
}

npg_result_t npg_comm_reject(npg_comm_t comm, const char* reason) {
  HandleCall call(comm);
  return guarded("npg_comm_reject", call.rank, call.size, [&] {
    npg::Communicator& c = call.get();
    check_arg(reason != nullptr, "reason is NULL");
    c.reject(reason);
    npg::throw_error(NPG_INVALID_ARGUMENT, reason);
  });
}

npg_result_t npg_comm_abort(npg_comm_t comm) {
  HandleCall call(comm);
  return guarded("npg_comm_abort", call.rank, call.size, [&] { call.get().abort(); });
}

npg_result_t npg_comm_destroy(npg_comm_t comm) {
  HandleCall call(comm);
  return guarded("npg_comm_destroy", call.rank, call.size, [&] {
    call.get();
    int64_t others = 0;
    std::unique_ptr<npg_comm> owned = npg::live_handles().remove_if_idle(comm, &others);
    if (!owned) {
      npg::throw_error(NPG_INVALID_USAGE, std::to_string(others) +
                                              " other call(s) on this communicator are "
                                              "still running; call npg_comm_abort, let them return, then destroy it");
    }
    owned->impl->close();  // on failure owned still frees the communicator
  });
}

npg_result_t npg_comm_rank(npg_comm_t comm, int32_t* rank) {
  HandleCall call(comm);
  return guarded("npg_comm_rank", call.rank, call.size, [&] {
    check_arg(rank != nullptr, "rank is NULL");
    *rank = call.get().rank();
  });
}

npg_result_t npg_comm_size(npg_comm_t comm, int32_t* rank_size) {
  HandleCall call(comm);
  return guarded("npg_comm_size", call.rank, call.size, [&] {
    check_arg(rank_size != nullptr, "rank_size is NULL");
    *rank_size = call.get().size();
  });
}

npg_result_t npg_comm_device_bytes(npg_comm_t comm, uint64_t* bytes) {
  HandleCall call(comm);
  return guarded("npg_comm_device_bytes", call.rank, call.size, [&] {
    check_arg(bytes != nullptr, "bytes is NULL");
    *bytes = call.get().device_bytes();
  });
}

// Leaves the last error alone on success so it can be called while reporting one.
const char* npg_comm_transport(npg_comm_t comm) {
  HandleCall call(comm);
  try {
    return call.get().transport();
  } catch (const npg::Error& e) {
    npg::set_last_error(std::string("npg_comm_transport: ") + e.what());
  }
  return "";
}

int64_t npg_live_comms(void) { return live_comms.load(); }

npg_result_t npg_advise_huge_pages(void* address, uint64_t bytes) {
  return guarded("npg_advise_huge_pages", -1, -1, [&] {
    check_arg(address != nullptr || bytes == 0, "address is NULL but bytes is " + std::to_string(bytes));
    npg::advise_huge_pages(address, bytes);
  });
}

npg_result_t npg_populate_pages(void* address, uint64_t bytes) {
  return guarded("npg_populate_pages", -1, -1, [&] {
    check_arg(address != nullptr || bytes == 0, "address is NULL but bytes is " + std::to_string(bytes));
    npg::populate_pages(address, bytes);
  });
}

size_t npg_dtype_size(npg_dtype_t dtype) {
  switch (dtype) {
    case NPG_INT8:
    case NPG_UINT8:
      return 1;
    case NPG_INT16:
    case NPG_FLOAT16:
    case NPG_BFLOAT16:
      return 2;
    case NPG_INT32:
    case NPG_FLOAT32:
      return 4;
    case NPG_INT64:
      return 8;
  }
  return 0;
}

const char* npg_result_name(npg_result_t result) {
  switch (result) {
    case NPG_SUCCESS:
      return "NPG_SUCCESS";
    case NPG_INVALID_ARGUMENT:
      return "NPG_INVALID_ARGUMENT";
    case NPG_INVALID_USAGE:
      return "NPG_INVALID_USAGE";
    case NPG_SYSTEM_ERROR:
      return "NPG_SYSTEM_ERROR";
    case NPG_REMOTE_ERROR:
      return "NPG_REMOTE_ERROR";
    case NPG_TIMEOUT:
      return "NPG_TIMEOUT";
    case NPG_ABORTED:
      return "NPG_ABORTED";
    case NPG_INTERNAL_ERROR:
      return "NPG_INTERNAL_ERROR";
  }
  return "NPG_UNKNOWN_RESULT";
}

const char* npg_last_error(void) { return npg::last_error(); }

const char* npg_last_vendor_library(void) { return npg::last_vendor_error().library.c_str(); }

int64_t npg_last_vendor_code(void) { return npg::last_vendor_error().code; }

const char* npg_last_vendor_code_name(void) { return npg::last_vendor_error().code_name.c_str(); }

const char* npg_last_vendor_message(void) { return npg::last_vendor_error().message.c_str(); }

int32_t npg_last_vendor_rank(void) { return npg::last_vendor_error().rank; }

}  // extern "C"

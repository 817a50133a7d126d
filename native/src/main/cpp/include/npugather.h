/*
 * npugather.h: the C ABI of the NpuGather collective core.
 *
 * One header, one set of result codes, opaque handles. The Java bridge binds to
 * exactly these functions; the C++ core behind them never lets an exception out.
 *
 * Thread safety: one communicator runs one collective at a time (like NCCL and
 * HCCL). npg_comm_abort() is the exception: it may be called from any thread at
 * any time before npg_comm_destroy() and makes a blocked call return NPG_ABORTED.
 */
#ifndef NPUGATHER_H_
#define NPUGATHER_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Whose fault it is, in the spirit of ncclResult_t. */
typedef enum {
  NPG_SUCCESS = 0,
  NPG_INVALID_ARGUMENT = 1, /* a parameter is out of range (names it in the last error) */
  NPG_INVALID_USAGE = 2,    /* arguments valid alone but not together, or ranks disagree */
  NPG_SYSTEM_ERROR = 3,     /* the OS or a library failed (errno text in the last error) */
  NPG_REMOTE_ERROR = 4,     /* a peer failed, exited or sent something malformed */
  NPG_TIMEOUT = 5,          /* the communicator's timeout elapsed */
  NPG_ABORTED = 6,          /* npg_comm_abort() was called */
  NPG_INTERNAL_ERROR = 7    /* a bug in this library */
} npg_result_t;

/* Element types; the numbers equal HcclDataType's so the hccl backend maps 1:1. */
typedef enum {
  NPG_INT8 = 0,
  NPG_INT16 = 1,
  NPG_INT32 = 2,
  NPG_FLOAT16 = 3,
  NPG_FLOAT32 = 4,
  NPG_INT64 = 5,
  NPG_UINT8 = 7,
  NPG_BFLOAT16 = 11
} npg_dtype_t;

/* Mirrors ATB's CommMode. */
typedef enum { NPG_COMM_MULTI_PROCESS = 0, NPG_COMM_MULTI_THREAD = 1 } npg_comm_mode_t;

/* Flags for npg_comm_init (host backend). */
/* Use the flat TCP ring even when all ranks share a host, and across hosts instead of the
   hierarchical "tcp-hier". */
#define NPG_FLAG_FORCE_TCP 0x1u
/* Shared memory (one host, or within each host of "tcp-hier"): copy through a staging area, no
   cross-memory attach. */
#define NPG_FLAG_FORCE_STAGING 0x2u
/* Flat TCP: the ring at every size, never the log-N algorithm. */
#define NPG_FLAG_FORCE_RING 0x4u
/* Flat TCP: the log-N (Bruck) algorithm at every size ("tcp-log-n"). */
#define NPG_FLAG_FORCE_LOG_N 0x8u

/* Most ranks one communicator may have, checked before anything is sized by rank_size. */
#define NPG_MAX_RANK_SIZE 65536

/* Upper bound of any backend's root info (HCCL's is 4108 bytes). */
#define NPG_ROOT_INFO_MAX_BYTES 8192

typedef struct npg_comm* npg_comm_t;

/*
 * Called on the root rank only, before npg_comm_init. Writes the opaque root info
 * that every rank passes to npg_comm_init. For "host" it names an endpoint of
 * this process (bound to bind_address, or chosen from the host's interfaces when
 * NULL/empty) and carries a fresh random secret; the endpoint stays open until
 * the root's npg_comm_init consumes it (succeeding, or failing once the ranks
 * have started to join; an init refused for its arguments leaves it for a retry),
 * npg_release_root_info releases it, or 10 minutes pass. For "hccl",
 * bind_address may be "device:N", the device HcclGetRootInfo runs on. For "lccl" it may be
 * "device:N", "domain:ID" or "device:N,domain:ID" (LcalGetUniqueId's device and domain).
 */
npg_result_t npg_get_root_info(const char* backend, const char* bind_address, void* root_info, size_t capacity,
                               size_t* root_info_size);

/*
 * Releases what npg_get_root_info keeps open for root_info in this process (the host
 * backend's listening endpoint). Idempotent; succeeds when there is nothing to release.
 */
npg_result_t npg_release_root_info(const char* backend, const void* root_info, size_t root_info_size);

/*
 * Creates this rank's communicator. Blocks until all rank_size ranks have joined
 * or timeout_ms elapses. device_id < 0 means "no device" (host backend).
 * root_info may be NULL where the backend needs none: "hccl" with a rank_table_file;
 * "lccl" with a comm_domain ("ID" or "ID:SIZE_MB" in multi-process mode, LCCL's domain;
 * the uid every rank thread passes in multi-thread mode).
 */
npg_result_t npg_comm_init(const char* backend, int32_t rank, int32_t rank_size, int32_t rank_root,
                           const char* comm_domain, int32_t comm_mode, int32_t device_id, const char* rank_table_file,
                           int64_t timeout_ms, uint32_t flags, const void* root_info, size_t root_info_size,
                           npg_comm_t* comm);

/*
 * Argument errors in the three all-gathers. With backend host and more than one rank, a rank
 * that rejects its own arguments (bad dtype or count, NULL buffer, send_count or segments
 * that do not match recv_counts, overlapping blocks, ...) still takes part in the
 * collective and passes its error text to the peers: every rank returns NPG_INVALID_USAGE
 * with the same text, "rank R rejected its arguments: <its error>", as soon as all have
 * called, instead of the peers waiting for the timeout; the communicator stays usable. So
 * the rejecting rank waits for its peers too (bounded by the timeout, abortable). Such an
 * error stays on the rejecting rank alone (NPG_INVALID_ARGUMENT or NPG_INVALID_USAGE at once)
 * when it cannot be told: a NULL or dead comm, a communicator of one rank, one already
 * aborted or broken by an earlier failure, and backends hccl and lccl, whose vendor
 * collectives carry no such message.
 */

/*
 * recv holds rank_size * count elements; rank r's count elements land at offset
 * r * count. In place when send == recv + rank * count * width: then none of this
 * rank's own bytes are moved.
 *
 * Host backend, every all-gather call: the regions to be received get
 * npg_advise_huge_pages, so that a freshly allocated buffer is faulted in 2 MiB at a time as
 * the peers' bytes arrive.
 */
npg_result_t npg_all_gather(npg_comm_t comm, const void* send, void* recv, uint64_t count, npg_dtype_t dtype);

/*
 * recv_counts[r] elements of rank r land at element offset recv_displs[r]. Every
 * rank passes the same recv_counts and send_count == recv_counts[rank]; ranks that
 * disagree all get NPG_INVALID_USAGE. recv_displs is this rank's own receive layout
 * (blocks must not overlap). In place when send == recv + recv_displs[rank] * width.
 */
npg_result_t npg_all_gather_v(npg_comm_t comm, const void* send, uint64_t send_count, void* recv,
                              const uint64_t* recv_counts, const uint64_t* recv_displs, npg_dtype_t dtype);

/* One piece of a rank's block: the block is the concatenation of its segments. */
typedef struct {
  const void* address;
  uint64_t bytes;
} npg_segment_t;

/* Most segments one rank may send in one npg_all_gather_v_segments call. */
#define NPG_MAX_SEGMENTS 65536

/*
 * npg_all_gather_v in bytes, for data spread over several buffers: this rank's block is
 * the concatenation of send_segments (their bytes add up to recv_counts[rank]) and is sent
 * straight from them. This rank's own block is not received: recv needs no room for it
 * (recv_displs[rank] is ignored), because the caller serves it from its input buffers.
 * Counts and displacements are in bytes; recv_counts is the same on every rank.
 */
npg_result_t npg_all_gather_v_segments(npg_comm_t comm, const npg_segment_t* send_segments, size_t segment_count,
                                       void* recv, const uint64_t* recv_counts, const uint64_t* recv_displs);

/*
 * For a binding whose own checks rejected this rank's arguments to the all-gather its peers
 * are calling: takes part in that collective as the C ABI's own argument errors do (above) and
 * returns NPG_INVALID_USAGE with the text every rank returns, naming this rank and reason.
 * NPG_INVALID_ARGUMENT with reason itself where the peers cannot be told.
 */
npg_result_t npg_comm_reject(npg_comm_t comm, const char* reason);

/* Makes any blocked or future call on comm fail with NPG_ABORTED; peers see NPG_REMOTE_ERROR. */
npg_result_t npg_comm_abort(npg_comm_t comm);

/*
 * Releases everything comm owns (sockets, shared memory, threads). comm is invalid afterwards.
 * While another thread is inside a call on comm it returns NPG_INVALID_USAGE and releases
 * nothing (abort, let the call return, then destroy). Handles are never reused: any call on a
 * destroyed handle, or on a value npg_comm_init never returned, is NPG_INVALID_USAGE.
 */
npg_result_t npg_comm_destroy(npg_comm_t comm);

/* Facts about a communicator, for diagnostics and tests. */
npg_result_t npg_comm_rank(npg_comm_t comm, int32_t* rank);
npg_result_t npg_comm_size(npg_comm_t comm, int32_t* rank_size);
/* "threads", "cma", "staging" or "tcp" for host; the backend's name otherwise. */
const char* npg_comm_transport(npg_comm_t comm);
/* Most device memory comm's last collective held at once (0 for host): for the device
   backends at most the device budget (NPUGATHER_DEVICE_BUFFER_BYTES, see docs/npu.md). */
npg_result_t npg_comm_device_bytes(npg_comm_t comm, uint64_t* bytes);

/*
 * For a large buffer about to be written for the first time: asks the kernel for transparent
 * huge pages over the whole pages inside [address, address + bytes) (madvise MADV_HUGEPAGE)
 * when bytes is NPG_HUGE_PAGE_ADVICE_MIN_BYTES or more, so the buffer is faulted in 2 MiB at a time instead of 4 KiB.
 * A hint: memory that refuses it keeps its pages. NPG_INVALID_ARGUMENT for a NULL address
 * with bytes > 0.
 */
#define NPG_HUGE_PAGE_ADVICE_MIN_BYTES (4ull << 20)
npg_result_t npg_advise_huge_pages(void* address, uint64_t bytes);

/*
 * For a buffer about to be written for the first time: faults in its pages over
 * [address, address + bytes), which must be writable memory of the caller and stay mapped
 * until the call returns (a touch of unmapped memory is a segmentation fault), without changing
 * its contents (one atomic add of zero per page), so that the writes that follow run at the
 * copy rate instead of trapping page by page. Safe while other threads write into the range,
 * so it can run ahead of a collective receiving into it; each fault holds only its own
 * mapping's lock, so the process's other mappings (mmap) are not held up meanwhile.
 * NPG_INVALID_ARGUMENT for a NULL address with bytes > 0.
 */
npg_result_t npg_populate_pages(void* address, uint64_t bytes);

/* Communicators of this process that npg_comm_init made and npg_comm_destroy has not released
 * yet: 0 when nothing leaked. */
int64_t npg_live_comms(void);

/* Bytes per element of dtype, 0 when dtype is unknown. */
size_t npg_dtype_size(npg_dtype_t dtype);

/* "NPG_TIMEOUT" and so on. */
const char* npg_result_name(npg_result_t result);

/*
 * Text of the last error on the calling thread: names the operation and the rank,
 * e.g. "npg_all_gather_v(rank 1/4): rank 3 exited (pid 4242)". Empty after success.
 */
const char* npg_last_error(void);

/*
 * The vendor part of the last error on the calling thread, when a vendor library's result
 * code caused it (HCCL, ACL or LCAL). Library: "HCCL", "ACL", "LCAL", or "" when the last
 * error has no vendor part (then the other fields are 0 / "" / -1). Code: the vendor's
 * numeric code (HcclResult, aclError, LCAL's negative codes). Code name: e.g.
 * "HCCL_E_TIMEOUT" ("HCCL_E_UNKNOWN" and the like for codes this library does not know).
 * Message: the vendor's text (HcclGetErrorString, aclGetRecentErrMsg) when those symbols
 * exist, else "". Rank: the reporting rank, -1 when unknown. Valid until the next call of
 * this library on the same thread; cleared by a successful call.
 */
const char* npg_last_vendor_library(void);
int64_t npg_last_vendor_code(void);
const char* npg_last_vendor_code_name(void);
const char* npg_last_vendor_message(void);
int32_t npg_last_vendor_rank(void);

#ifdef __cplusplus
}
#endif

#endif /* NPUGATHER_H_ */

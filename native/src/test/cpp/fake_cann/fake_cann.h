// A simulated CANN runtime for testing the device backends' binding without an NPU: the ACL,
// HCCL and LCAL symbols the backends resolve (libascendcl.so, libhccl.so, liblcal.so), with
// "device" memory in host memory and a real all-gather between ranks (threads of one process
// or separate processes, through POSIX shared memory; fake_collective.h). It proves the
// binding, never anything about NPU hardware.
//
// Fault switches, read at call time:
//   NPUGATHER_FAKE_CANN_INIT_FAIL=<code>         HcclCommInit* / LcalCommInit* return this code ...
//   NPUGATHER_FAKE_CANN_INIT_FAIL_TIMES=<n>      ... only for the first n attempts of each rank
//   NPUGATHER_FAKE_CANN_INIT_FAIL_MESSAGE=<text> ... with this recent-error text (aclGetRecentErrMsg)
//   NPUGATHER_FAKE_CANN_INIT_FAIL_RANK=<rank>    ... on that rank only
// As in HCOMM, one HcclCommInitRootInfo attempt (success or failure) consumes the root info's
// topology detection: a rank's second attempt with the same root info waits out the connect
// timeout and returns HCCL_E_TIMEOUT.
//   NPUGATHER_FAKE_CANN_HANG=allgather           collectives never complete (until destroyed)
//   NPUGATHER_FAKE_CANN_COLLECTIVE_MS=<ms>       each collective takes at least this long on its stream
//   NPUGATHER_FAKE_CANN_FAIL_RANK=<rank>         collectives fail on that rank (HCCL_E_INTERNAL,
//                                                LCAL_ERROR_INTERNAL);
//                                                peers' streams fail with SUSPECT_REMOTE_ERROR
//   NPUGATHER_FAKE_CANN_CONNECT_TIMEOUT_MS=<ms>  rendezvous timeout (default HCCL_CONNECT_TIMEOUT s)
//   NPUGATHER_FAKE_CANN_DEVICE_COUNT=<n>         devices 0..n-1 exist (default 8)
//   NPUGATHER_FAKE_CANN_DEVICE_MEMORY=<bytes>    each device's memory (default 64 GiB): aclrtGetMemInfo
//                                                reports it, aclrtMalloc past it fails with
//                                                ACL_ERROR_RT_MEMORY_ALLOCATION (207001)
//   NPUGATHER_FAKE_CANN_SOC=<name>               aclrtGetSocName (default Ascend910B1, an Atlas A2)
//   NPUGATHER_FAKE_CANN_SERVERS=<s0,s1,...>      the server of each rank (default all on server 0):
//                                                with the SoC, decides whether HcclAllGatherV is
//                                                refused (HCCL_E_NOT_SUPPORT) as HCCL's doc states
// Teardown as in CANN: HcclCommDestroy returns HCCL_E_AGAIN while another thread is inside an
// operation call (HcclAllGather, HcclAllGatherV) on the communicator, not while its work is queued
// on a stream (that work is cancelled); aclrtDestroyStream refuses a stream with pending work,
// aclrtDestroyStreamForce discards it (cancelling a running task). Live communicators, streams
// and device bytes are counted per process.
//   NPUGATHER_FAKE_CANN_OP_CALL_MS=<ms>          each HCCL operation call stays inside this long
// Waiting for a stream as in CANN: every aclrtSynchronizeStream(WithTimeout) wait that expires
// would log at ERROR and report an error message in the real runtime, and is counted
// (npgFakeCannErrorReports); aclrtStreamQuery reports whether the stream is done, silently.
// Trace: NPUGATHER_FAKE_CANN_TRACE=<file> appends "<call> rank=<r> device=<d> pid=<p>" for
// every communicator init and collective (the device current on the calling thread).
// Built with FAKE_CANN_MINIMAL the optional symbols (HcclAllGatherV, HcclGetErrorString,
// aclrtSynchronizeStreamWithTimeout, aclrtStreamQuery, aclGetRecentErrMsg) are absent, like an
// old CANN.
// FAKE_CANN_COLLECTIVES_ONLY / FAKE_CANN_COMM_MANAGEMENT_ONLY build the two halves of a newer
// CANN, where communicator management lives in libhcomm.so and the collectives in libhccl.so.
#ifndef NPUGATHER_TEST_FAKE_CANN_H_
#define NPUGATHER_TEST_FAKE_CANN_H_

#include <stddef.h>
#include <stdint.h>

#include <atomic>
#include <functional>

#define FAKE_CANN_EXPORT __attribute__((visibility("default")))

namespace fake_cann {

constexpr int kAclSuccess = 0;
constexpr int kAclErrorInvalidParam = 100000;
constexpr int kAclErrorRepeatInitialize = 100002;
constexpr int kAclErrorRtParamInvalid = 107000;
constexpr int kAclErrorRtInvalidDeviceId = 107001;
constexpr int kAclErrorRtContextNull = 107002;
constexpr int kAclErrorRtDeviceTaskAbort = 107022;
constexpr int kAclErrorRtInternal = 507000;
constexpr int kAclErrorRtAicoreException = 507015;
constexpr int kAclErrorRtStreamSyncTimeout = 507046;
constexpr int kAclErrorRtSuspectRemoteError = 507057;
constexpr int kAclErrorRtMemoryAllocation = 207001;
constexpr int kAclStreamStatusComplete = 0;  // aclrtStreamStatus
constexpr int kAclStreamStatusNotReady = 1;

constexpr int kHcclSuccess = 0;
constexpr int kHcclEPara = 1;
constexpr int kHcclEPtr = 2;
constexpr int kHcclEInternal = 4;
constexpr int kHcclENotSupport = 5;
constexpr int kHcclETimeout = 9;
constexpr int kHcclERuntime = 15;
constexpr int kHcclEAgain = 20;

// A stream task: returns an aclError; must return promptly once cancelled becomes true.
using Task = std::function<int(const std::atomic<bool>& cancelled)>;

// Internal interface of the fake libascendcl.so used by the fake libhccl.so.
FAKE_CANN_EXPORT int enqueue(void* stream, Task task);
FAKE_CANN_EXPORT bool is_device_range(const void* p, size_t bytes);
FAKE_CANN_EXPORT int current_device();  // -1 when the thread has none
FAKE_CANN_EXPORT void set_recent_error(const char* text);
FAKE_CANN_EXPORT void count_comms(int delta);  // the live count sits here: HCCL may be split in two libraries
// Called first by every simulated HCCL entry point: the first call of the process reads
// HCCL_CONNECT_TIMEOUT / HCCL_EXEC_TIMEOUT (defaults 120 s and 1836 s) and keeps them for good,
// as HCOMM's externalinput.cc does; later changes to the environment are never seen.
FAKE_CANN_EXPORT void latch_hccl_env();

}  // namespace fake_cann

extern "C" {
// Live object counts, for leak checks in tests.
FAKE_CANN_EXPORT int npgFakeCannLiveAllocations();
FAKE_CANN_EXPORT long long npgFakeCannLiveDeviceBytes();
FAKE_CANN_EXPORT int npgFakeCannDeviceResets();  // aclrtResetDevice(Force) calls of this process
// Stream waits that expired: each an ERROR log and an error message report in the real runtime.
FAKE_CANN_EXPORT int npgFakeCannErrorReports();
// The most memory a device held at once since the last reset of the peaks (to what it holds now).
FAKE_CANN_EXPORT long long npgFakeCannPeakDeviceBytes(int device);
FAKE_CANN_EXPORT void npgFakeCannResetPeakDeviceBytes();
FAKE_CANN_EXPORT int npgFakeCannLiveStreams();
FAKE_CANN_EXPORT int npgFakeCannLiveComms();
// The HCCL timeouts this process latched (seconds); false when no HCCL call happened yet.
FAKE_CANN_EXPORT bool npgFakeCannHcclTimeouts(int* connect_s, int* exec_s);
}

#endif  // NPUGATHER_TEST_FAKE_CANN_H_

// The subset of the ACL runtime and HCCL C API this backend uses, resolved at run time
// with dlopen/dlsym: nothing of CANN is needed to build, only to run.
#ifndef NPUGATHER_HCCL_CANN_LIBRARY_H_
#define NPUGATHER_HCCL_CANN_LIBRARY_H_

#include <stddef.h>
#include <stdint.h>

#include <string>

namespace npg {
namespace hccl {

// C types and values of the ACL/HCCL ABI (no CANN header is included).
using aclError = int;
using HcclResult = int;
using aclrtStream = void*;
using HcclComm = void*;
constexpr size_t kHcclRootInfoBytes = 4108;  // sizeof(HcclRootInfo)
struct HcclRootInfo {
  char internal[kHcclRootInfoBytes];
};

constexpr aclError kAclSuccess = 0;
constexpr aclError kAclErrorRepeatInitialize = 100002;
constexpr aclError kAclErrorRtStreamSyncTimeout = 507046;
constexpr HcclResult kHcclSuccess = 0;
constexpr HcclResult kHcclEUnavail = 7;
constexpr HcclResult kHcclEAgain = 20;
constexpr int kHcclDataTypeUint8 = 7;
constexpr int kAclMemcpyHostToDevice = 1;
constexpr int kAclMemcpyDeviceToHost = 2;
constexpr int kAclMemMallocHugeFirst = 0;

struct CannApi {
  // libascendcl.so
  aclError (*aclInit)(const char* config_path);
  aclError (*aclrtSetDevice)(int32_t device_id);
  aclError (*aclrtGetDevice)(int32_t* device_id);
  aclError (*aclrtCreateStream)(aclrtStream* stream);
  aclError (*aclrtDestroyStream)(aclrtStream stream);
  aclError (*aclrtSynchronizeStream)(aclrtStream stream);
  aclError (*aclrtMalloc)(void** ptr, size_t size, int policy);
  aclError (*aclrtFree)(void* ptr);
  aclError (*aclrtMemcpy)(void* dst, size_t dest_max, const void* src, size_t count, int kind);
  // Optional (absent in old CANN): nullptr when missing.
  aclError (*aclrtSynchronizeStreamWithTimeout)(aclrtStream stream, int32_t timeout_ms);
  const char* (*aclGetRecentErrMsg)();

  // libhccl.so, communicator management also in libhcomm.so
  HcclResult (*HcclGetRootInfo)(HcclRootInfo* root_info);
  HcclResult (*HcclCommInitRootInfo)(uint32_t n_ranks, const HcclRootInfo* root_info, uint32_t rank,
                                     HcclComm* comm);
  HcclResult (*HcclCommInitClusterInfo)(const char* rank_table_file, uint32_t rank, HcclComm* comm);
  HcclResult (*HcclCommDestroy)(HcclComm comm);
  HcclResult (*HcclAllGather)(void* send, void* recv, uint64_t send_count, int data_type, HcclComm comm,
                              aclrtStream stream);
  // Optional: nullptr when missing.
  HcclResult (*HcclAllGatherV)(void* send, uint64_t send_count, void* recv, const void* recv_counts,
                               const void* recv_displs, int data_type, HcclComm comm, aclrtStream stream);
  const char* (*HcclGetErrorString)(HcclResult code);

  std::string acl_path;   // the files the symbols came from, for diagnostics
  std::string hccl_path;
  std::string hcomm_path;  // empty when libhcomm.so was not needed or not found
};

// Loads the libraries once per process (thread-safe; a failed load is retried on the next
// call). Throws NPG_SYSTEM_ERROR naming the file or symbol, every path tried and the fix.
const CannApi& cann_api();

// Calls aclInit(NULL) once per process; "repeat initialize" counts as success.
void ensure_acl_initialized(const CannApi& api);

}  // namespace hccl
}  // namespace npg

#endif  // NPUGATHER_HCCL_CANN_LIBRARY_H_

// The subset of the HCCL C API this backend uses, resolved at run time with dlopen/dlsym
// from libhccl.so (communicator management from libhcomm.so in newer CANN).
#ifndef NPUGATHER_HCCL_HCCL_LIBRARY_H_
#define NPUGATHER_HCCL_HCCL_LIBRARY_H_

#include <stddef.h>
#include <stdint.h>

#include <string>

#include "../cann/acl_library.h"

namespace npg {
namespace hccl {

using cann::aclrtStream;
// C types and values of the HCCL ABI (no CANN header is included).
using HcclResult = int;
using HcclComm = void*;
constexpr size_t kHcclRootInfoBytes = 4108;  // sizeof(HcclRootInfo)
struct HcclRootInfo {
  char internal[kHcclRootInfoBytes];
};
// HCCL's SYS_MAX_COUNT: a collective of more elements per rank is HCCL_E_PARA.
constexpr uint64_t kHcclMaxCount = 0x7FFFFFFFFull;
constexpr HcclResult kHcclSuccess = 0;
constexpr HcclResult kHcclENotSupport = 5;
constexpr HcclResult kHcclEUnavail = 7;
constexpr HcclResult kHcclEAgain = 20;

struct HcclApi {
  const cann::AclApi* acl;

  HcclResult (*HcclGetRootInfo)(HcclRootInfo* root_info);
  HcclResult (*HcclCommInitRootInfo)(uint32_t n_ranks, const HcclRootInfo* root_info, uint32_t rank, HcclComm* comm);
  HcclResult (*HcclCommInitClusterInfo)(const char* rank_table_file, uint32_t rank, HcclComm* comm);
  HcclResult (*HcclCommDestroy)(HcclComm comm);
  HcclResult (*HcclAllGather)(void* send, void* recv, uint64_t send_count, int data_type, HcclComm comm,
                              aclrtStream stream);
  // Optional: nullptr when missing.
  HcclResult (*HcclAllGatherV)(void* send, uint64_t send_count, void* recv, const void* recv_counts,
                               const void* recv_displs, int data_type, HcclComm comm, aclrtStream stream);
  const char* (*HcclGetErrorString)(HcclResult code);

  std::string hccl_path;   // the files the symbols came from, for diagnostics
  std::string hcomm_path;  // empty when libhcomm.so was not needed or not found
};

// Loads libascendcl.so (and initialises ACL), then libhccl.so, once per process
// (thread-safe; a failed load is retried on the next call). Throws NPG_SYSTEM_ERROR naming
// the file or symbol, every path tried and the fix.
const HcclApi& hccl_api();

}  // namespace hccl
}  // namespace npg

#endif  // NPUGATHER_HCCL_HCCL_LIBRARY_H_

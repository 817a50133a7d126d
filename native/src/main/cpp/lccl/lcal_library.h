// The subset of LCAL's C API (liblcal.so, shipped with ATB/NNAL) this backend uses, resolved
// at run time with dlopen/dlsym, and LCAL's result codes as npg errors.
#ifndef NPUGATHER_LCCL_LCAL_LIBRARY_H_
#define NPUGATHER_LCCL_LCAL_LIBRARY_H_

#include <stddef.h>
#include <stdint.h>

#include <string>

#include "../cann/acl_library.h"
#include "../core/error.h"
#include "npugather.h"

namespace npg {
namespace lccl {

using cann::aclrtStream;
// C types and values of the LCAL ABI (ATB's lcal_api.h; no header is included).
using LcalCommPtr = void*;
constexpr int kLcalSuccess = 0;
constexpr int kLcalMaxRankSize = 128;
constexpr int kLcalMinBufferMb = 200;  // LCAL_COMM_BUFFER_SIZE
// LCAL sizes its buffer as SIZE_MB * 1 MiB + 4 MiB in a 32-bit int (LcalComm::InitMem): 2044..4092
// overflow to a negative or zero size (the init fails), 4093..4295 wrap to less than the kernels'
// fixed window, larger values wrap around again.
constexpr int kLcalMaxBufferMb = 2043;  // Java's AllGatherParam.MAX_LCCL_BUFFER_MB
constexpr int kLcalMaxCommDomain = 65535;
// The HcclDataType the all-gathers move bytes as. ATB registers LCCL's AllGather kernels for
// INT8, INT16, INT32, INT64, FP16, FP32 and BF16 only (RegistCCLOp2Kernel in lcal_internal.cpp):
// any other type, UINT8 included, has no kernel and fails with LCAL_ERROR_MKIRT on two ranks or more.
constexpr int kLcalByteDataType = 0;  // HCCL_DATA_TYPE_INT8

struct LcalApi {
  const cann::AclApi* acl;

  int (*LcalCommInitThread)(int rank, int rank_size, const char* uid, LcalCommPtr* comm);
  int (*LcclAllGather)(void* send, void* recv, int64_t send_count, int data_type, LcalCommPtr comm, aclrtStream stream);
  int (*LcclCommDestroy)(LcalCommPtr comm);
  int (*LcalCommInitRankWithDomain)(int comm_domain, int rank_size, int rank, LcalCommPtr* comm);
  // Optional (newer ATB): nullptr when missing; then only the default buffer size works,
  // through LcalCommInitRankWithDomain.
  int (*LcalCommInitRankWithCustDomainSize)(int comm_domain, int buffer_mb, int rank_size, int rank, LcalCommPtr* comm,
                                            bool auto_magic);

  std::string path;  // the file the symbols came from, for diagnostics
};

// Loads libascendcl.so (and initialises ACL), then liblcal.so, once per process (thread-safe;
// a failed load is retried on the next call). liblcal.so is looked for in
// NPUGATHER_CANN_LIB_DIR, ATB_HOME_PATH/lib, LD_LIBRARY_PATH and the default NNAL installs.
// Throws NPG_SYSTEM_ERROR naming the file or symbol, every path tried and the fix.
const LcalApi& lcal_api();

// "LCAL_ERROR_TIMEOUT" and so on; "LCAL_ERROR_UNKNOWN" for codes this library does not know.
const char* lcal_result_name(int code);
npg_result_t npg_code_of_lcal(int code);
// Library "LCAL", the code, its name and aclGetRecentErrMsg's text (LCAL has no error string).
VendorError lcal_vendor_error(const LcalApi& api, int code);
[[noreturn]] void throw_lcal_error(const LcalApi& api, const char* op, int code, const std::string& where);

}  // namespace lccl
}  // namespace npg

#endif  // NPUGATHER_LCCL_LCAL_LIBRARY_H_

// The ACL runtime (libascendcl.so) resolved at run time with dlopen/dlsym, and the library
// search every CANN backend shares: nothing of CANN is needed to build, only to run.
#ifndef NPUGATHER_CANN_ACL_LIBRARY_H_
#define NPUGATHER_CANN_ACL_LIBRARY_H_

#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>

#include <initializer_list>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace npg {
namespace cann {

// C types and values of the ACL ABI (no CANN header is included).
using aclError = int;
using aclrtStream = void*;
constexpr aclError kAclSuccess = 0;
constexpr aclError kAclErrorRepeatInitialize = 100002;
constexpr aclError kAclErrorRtStreamSyncTimeout = 507046;
constexpr int kAclMemcpyHostToDevice = 1;
constexpr int kAclMemcpyDeviceToHost = 2;
constexpr int kAclMemMallocHugeFirst = 0;
constexpr int kAclHbmMem = 1;                // aclrtMemAttr ACL_HBM_MEM (DDR on devices without HBM)
constexpr int kAclStreamStatusComplete = 0;  // aclrtStreamStatus ACL_STREAM_STATUS_COMPLETE
// HcclDataType, which LCCL uses too: every collective here moves bytes.
constexpr int kHcclDataTypeUint8 = 7;

struct AclApi {
  aclError (*aclInit)(const char* config_path);
  aclError (*aclrtSetDevice)(int32_t device_id);
  aclError (*aclrtGetDevice)(int32_t* device_id);
  aclError (*aclrtCreateStream)(aclrtStream* stream);
  aclError (*aclrtDestroyStream)(aclrtStream stream);
  aclError (*aclrtSynchronizeStream)(aclrtStream stream);
  aclError (*aclrtMalloc)(void** ptr, size_t size, int policy);
  aclError (*aclrtFree)(void* ptr);
  aclError (*aclrtMemcpy)(void* dst, size_t dest_max, const void* src, size_t count, int kind);
  aclError (*aclrtResetDevice)(int32_t device_id);
  // Optional (absent in old CANN): nullptr when missing.
  aclError (*aclrtSynchronizeStreamWithTimeout)(aclrtStream stream, int32_t timeout_ms);
  aclError (*aclrtStreamQuery)(aclrtStream stream, int* status);  // aclrtStreamStatus; silent
  aclError (*aclrtDestroyStreamForce)(aclrtStream stream);        // discards pending tasks
  aclError (*aclrtResetDeviceForce)(int32_t device_id);           // whatever the set count
  const char* (*aclrtGetSocName)();                               // "Ascend910B1" and so on
  const char* (*aclGetRecentErrMsg)();
  // Free and total device memory of the current device, system reserve excluded.
  aclError (*aclrtGetMemInfo)(int attr, size_t* free_bytes, size_t* total_bytes);

  std::string path;  // the file the symbols came from, for diagnostics
};

// Loads libascendcl.so once per process (thread-safe; a failed load is retried on the next
// call) and calls aclInit(NULL) once ("repeat initialize" counts as success). Throws
// NPG_SYSTEM_ERROR naming backend, the file or symbol, every path tried and the fix.
const AclApi& acl_api(const char* backend);

// Where a library was looked for: a directory (empty: plain dlopen by name, which searches
// LD_LIBRARY_PATH, the runpath and ld.so.cache) and where that directory came from.
struct SearchDir {
  std::string dir;
  std::string origin;
};

// The CANN search order: NPUGATHER_CANN_LIB_DIR, ASCEND_HOME_PATH/lib64, ASCEND_TOOLKIT_HOME/lib64,
// LD_LIBRARY_PATH, then the default installs.
std::vector<SearchDir> cann_search_dirs();

struct LoadedLibrary {
  void* handle = nullptr;  // nullptr when not found
  std::string path;        // the file the loader picked
};

// Tries file in every directory of dirs in order, skipping duplicates; appends one line per
// failed attempt to *tried.
LoadedLibrary open_library(const std::string& file, const std::vector<SearchDir>& dirs, std::string* tried);

std::string dir_of(const std::string& path);

template <typename Fn>
void resolve(void* handle, const char* name, Fn* out) {
  *out = handle ? reinterpret_cast<Fn>(dlsym(handle, name)) : nullptr;
}

// The first name whose symbol is missing (false), or nullptr when all are there.
const char* first_missing(std::initializer_list<std::pair<const char*, bool>> symbols);

// Runs load() until it succeeds once (thread-safe; a failure is retried on the next call),
// then returns its result, never freed, for the life of the process.
template <typename Api, typename Load>
const Api& load_once(Load&& load) {
  static std::mutex* mutex = new std::mutex();
  static Api* api = nullptr;
  std::lock_guard<std::mutex> lock(*mutex);
  if (api == nullptr) api = load();
  return *api;
}

// How to make CANN visible; ends every "cannot load" message.
extern const char* const kCannFixHint;

}  // namespace cann
}  // namespace npg

#endif  // NPUGATHER_CANN_ACL_LIBRARY_H_

// Backend "hccl": Huawei's HCCL on Ascend NPUs, loaded at run time from the CANN install.
#ifndef NPUGATHER_HCCL_HCCL_BACKEND_H_
#define NPUGATHER_HCCL_HCCL_BACKEND_H_

#include <memory>

#include "../core/backend.h"

namespace npg {
namespace hccl {

std::unique_ptr<Backend> make_hccl_backend();

}  // namespace hccl
}  // namespace npg

#endif  // NPUGATHER_HCCL_HCCL_BACKEND_H_

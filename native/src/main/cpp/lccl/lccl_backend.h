// Backend "lccl": LCCL (ATB's single-node collective library) on Ascend NPUs, loaded at run
// time from liblcal.so.
#ifndef NPUGATHER_LCCL_LCCL_BACKEND_H_
#define NPUGATHER_LCCL_LCCL_BACKEND_H_

#include <memory>

#include "../core/backend.h"

namespace npg {
namespace lccl {

std::unique_ptr<Backend> make_lccl_backend();

}  // namespace lccl
}  // namespace npg

#endif  // NPUGATHER_LCCL_LCCL_BACKEND_H_

// Backend "host": the CPU collective of this library.
#ifndef NPUGATHER_HOST_HOST_BACKEND_H_
#define NPUGATHER_HOST_HOST_BACKEND_H_

#include <memory>

#include "../core/backend.h"

namespace npg {
namespace host {

std::unique_ptr<Backend> make_host_backend();

}  // namespace host
}  // namespace npg

#endif  // NPUGATHER_HOST_HOST_BACKEND_H_

// libFuzzer target over every decoder of the host backend that reads bytes from the
// network: frame headers, error frames, the incremental frame reader of the handshakes,
// hellos, rank tables and root infos. The first byte picks the decoder. Any input may be
// rejected with npg::Error; nothing else may happen (no crash, no sanitizer report, no
// allocation beyond the stated limits).
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <unistd.h>

#include <vector>

#include "core/error.h"
#include "host/bootstrap.h"
#include "host/root_info.h"
#include "host/wire.h"

using namespace npg::host;

namespace {

void decode_frame_header(const uint8_t* data, size_t size) {
  if (size < kFrameHeaderBytes) return;
  FrameType type;
  check_frame_header(data, FrameType::kResponse, 1024, true, "fuzzer", &type);
}

// Feeds the bytes through a socket pair to the frame reader the acceptor uses.
void assemble_frame(const uint8_t* data, size_t size) {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds) != 0) return;
  UniqueFd reader(fds[0]);
  UniqueFd writer(fds[1]);
  if (size > 0 && write(writer.get(), data, size) < 0) return;
  writer.reset();
  FrameAssembler frame;
  for (int round = 0; round < 4; ++round) {
    if (frame.read_some(reader.get(), FrameType::kResponse, 2048, false, "fuzzer") !=
        FrameAssembler::Status::kComplete) {
      return;
    }
    frame.reset();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t selector = data[0];
  std::vector<uint8_t> body(data + 1, data + size);
  try {
    switch (selector % 6) {
      case 0:
        decode_frame_header(body.data(), body.size());
        break;
      case 1:
        throw_error_frame(body);
        break;
      case 2:
        assemble_frame(body.data(), body.size());
        break;
      case 3:
        decode_hello(body);
        break;
      case 4: {
        // The rank size the receiver expects comes from its own arguments: 1..64 here.
        int32_t rank_size = 1 + (selector >> 3) % 64;
        decode_table(body, rank_size, "fuzzer");
        break;
      }
      case 5:
        HostRootInfo::parse(body.data(), body.size());
        break;
    }
  } catch (const npg::Error&) {
  }
  return 0;
}

// Explicit little-endian encoding and length-checked frames of the host protocol.
#ifndef NPUGATHER_HOST_WIRE_H_
#define NPUGATHER_HOST_WIRE_H_

#include <stddef.h>
#include <stdint.h>

#include <string>
#include <vector>

#include "socket_util.h"

namespace npg {
namespace host {

class ByteWriter {
 public:
  void u8(uint8_t v) { buf_.push_back(v); }
  void u16(uint16_t v);
  void u32(uint32_t v);
  void u64(uint64_t v);
  void i32(int32_t v) { u32(static_cast<uint32_t>(v)); }
  void bytes(const void* data, size_t len);
  void str(const std::string& s);  // u16 length + bytes
  void endpoint(const Endpoint& ep);
  const std::vector<uint8_t>& data() const { return buf_; }

 private:
  std::vector<uint8_t> buf_;
};

// Reads untrusted bytes: every read is bounds-checked and throws NPG_REMOTE_ERROR.
class ByteReader {
 public:
  ByteReader(const uint8_t* data, size_t len) : p_(data), len_(len) {}
  explicit ByteReader(const std::vector<uint8_t>& v) : p_(v.data()), len_(v.size()) {}
  uint8_t u8();
  uint16_t u16();
  uint32_t u32();
  uint64_t u64();
  int32_t i32() { return static_cast<int32_t>(u32()); }
  void bytes(void* out, size_t len);
  std::string str(size_t max_len);
  Endpoint endpoint();
  void expect_end() const;

 private:
  const uint8_t* take(size_t n);
  const uint8_t* p_;
  size_t len_;
  size_t pos_ = 0;
};

enum class FrameType : uint32_t {
  kTable = 2,
  kError = 3,
  kReport = 4,
  kGo = 5,
  kChallenge = 7,  // handshake: acceptor's nonce
  kResponse = 8,   // handshake: connector's nonce, MAC and payload
  kProof = 9,      // handshake: acceptor's MAC
  kRetry = 10,     // handshake: acceptor dropped the connection to make room; connect again
};

constexpr uint32_t kFrameMagic = 0x4647504eu;  // "NPGF"
constexpr size_t kFrameHeaderBytes = 12;
constexpr size_t kMaxErrorFrameBytes = 4096;

void send_frame(int fd, FrameType type, const std::vector<uint8_t>& body, const Deadline& deadline,
                const std::string& peer);

// Reads one frame of the expected type with a body of at most max_len bytes. An error
// frame is rethrown as npg::Error with its code and "<peer> reported: <text>". Any other
// type, a bad magic or an oversized length -> NPG_REMOTE_ERROR; nothing past max_len is read.
std::vector<uint8_t> recv_frame(int fd, FrameType expected, size_t max_len, const Deadline& deadline, int cancel_fd,
                                const std::string& peer);

std::vector<uint8_t> encode_error(uint32_t code, const std::string& text);

// Checks a frame header: returns the body length, or throws NPG_REMOTE_ERROR for a bad
// magic, a type other than expected (or kError, or kRetry when retry_allowed) and a body
// over max_len (kMaxErrorFrameBytes for an error frame).
uint32_t check_frame_header(const uint8_t header[kFrameHeaderBytes], FrameType expected, size_t max_len,
                            bool retry_allowed, const std::string& peer, FrameType* type);
// Throws the npg::Error an error frame's body carries.
[[noreturn]] void throw_error_frame(const std::vector<uint8_t>& body);

// Collects one frame from a non-blocking socket across as many reads as it takes.
class FrameAssembler {
 public:
  enum class Status { kIncomplete, kComplete, kClosed };
  // Reads what is available. kClosed: EOF or reset before the frame was whole. A
  // complete error frame is thrown; any other bad frame throws NPG_REMOTE_ERROR.
  Status read_some(int fd, FrameType expected, size_t max_len, bool retry_allowed, const std::string& peer);
  FrameType type() const { return type_; }
  // At least one byte arrived and the bytes so far agree with a frame of type expected:
  // the peer is on its way through the protocol, not a stranger that sent nothing useful.
  bool begins(FrameType expected) const;
  const std::vector<uint8_t>& body() const { return body_; }
  void reset();

 private:
  uint8_t header_[kFrameHeaderBytes] = {};
  size_t header_got_ = 0;
  std::vector<uint8_t> body_;
  size_t body_got_ = 0;
  bool have_header_ = false;
  FrameType type_ = FrameType::kError;
};

}  // namespace host
}  // namespace npg

#endif  // NPUGATHER_HOST_WIRE_H_

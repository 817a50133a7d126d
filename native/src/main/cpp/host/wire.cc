#include "wire.h"

#include <string.h>

#include "../core/error.h"

namespace npg {
namespace host {

void ByteWriter::u16(uint16_t v) {
  for (int i = 0; i < 2; ++i) buf_.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void ByteWriter::u32(uint32_t v) {
  for (int i = 0; i < 4; ++i) buf_.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void ByteWriter::u64(uint64_t v) {
  for (int i = 0; i < 8; ++i) buf_.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void ByteWriter::bytes(const void* data, size_t len) {
  auto* p = static_cast<const uint8_t*>(data);
  buf_.insert(buf_.end(), p, p + len);
}
void ByteWriter::str(const std::string& s) {
  size_t len = s.size() > 0xffff ? 0xffff : s.size();
  u16(static_cast<uint16_t>(len));
  bytes(s.data(), len);
}
void ByteWriter::endpoint(const Endpoint& ep) {
  u16(ep.family);
  u16(ep.port);
  bytes(ep.addr, sizeof(ep.addr));
}

const uint8_t* ByteReader::take(size_t n) {
  if (n > len_ - pos_) throw_error(NPG_REMOTE_ERROR, "malformed message: truncated");
  const uint8_t* at = p_ + pos_;
  pos_ += n;
  return at;
}
uint8_t ByteReader::u8() { return *take(1); }
uint16_t ByteReader::u16() {
  const uint8_t* b = take(2);
  return static_cast<uint16_t>(b[0] | (b[1] << 8));
}
uint32_t ByteReader::u32() {
  const uint8_t* b = take(4);
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | b[i];
  return v;
}
uint64_t ByteReader::u64() {
  const uint8_t* b = take(8);
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | b[i];
  return v;
}
void ByteReader::bytes(void* out, size_t len) { memcpy(out, take(len), len); }
std::string ByteReader::str(size_t max_len) {
  size_t len = u16();
  if (len > max_len) throw_error(NPG_REMOTE_ERROR, "malformed message: string of " + std::to_string(len) + " bytes");
  const uint8_t* b = take(len);
  return std::string(reinterpret_cast<const char*>(b), len);
}
Endpoint ByteReader::endpoint() {
  Endpoint ep;
  ep.family = u16();
  ep.port = u16();
  bytes(ep.addr, sizeof(ep.addr));
  if (ep.family != 2 /* AF_INET */ && ep.family != 10 /* AF_INET6 */) {
    throw_error(NPG_REMOTE_ERROR, "malformed message: address family " + std::to_string(ep.family));
  }
  return ep;
}
void ByteReader::expect_end() const {
  if (pos_ != len_) throw_error(NPG_REMOTE_ERROR, "malformed message: trailing bytes");
}

void send_frame(int fd, FrameType type, const std::vector<uint8_t>& body, const Deadline& deadline,
                const std::string& peer) {
  ByteWriter w;
  w.u32(kFrameMagic);
  w.u32(static_cast<uint32_t>(type));
  w.u32(static_cast<uint32_t>(body.size()));
  w.bytes(body.data(), body.size());
  send_all(fd, w.data().data(), w.data().size(), deadline, -1, peer);
}

std::vector<uint8_t> encode_error(uint32_t code, const std::string& text) {
  ByteWriter w;
  w.u32(code);
  w.str(text.size() > kMaxErrorFrameBytes - 8 ? text.substr(0, kMaxErrorFrameBytes - 8) : text);
  return w.data();
}

std::vector<uint8_t> recv_frame(int fd, FrameType expected, size_t max_len, const Deadline& deadline,
                                int cancel_fd, const std::string& peer) {
  uint8_t header[kFrameHeaderBytes];
  recv_all(fd, header, sizeof(header), deadline, cancel_fd, peer);
  ByteReader hr(header, sizeof(header));
  uint32_t magic = hr.u32();
  uint32_t type = hr.u32();
  uint32_t len = hr.u32();
  if (magic != kFrameMagic) throw_error(NPG_REMOTE_ERROR, peer + " sent a frame with a bad magic");
  bool is_error = type == static_cast<uint32_t>(FrameType::kError);
  if (!is_error && type != static_cast<uint32_t>(expected)) {
    throw_error(NPG_REMOTE_ERROR, peer + " sent an unexpected frame of type " + std::to_string(type));
  }
  size_t limit = is_error ? kMaxErrorFrameBytes : max_len;
  if (len > limit) {
    throw_error(NPG_REMOTE_ERROR, peer + " sent a frame of " + std::to_string(len) + " bytes (limit " +
                                      std::to_string(limit) + ")");
  }
  std::vector<uint8_t> body(len);
  recv_all(fd, body.data(), len, deadline, cancel_fd, peer);
  if (is_error) {
    ByteReader r(body);
    uint32_t code = r.u32();
    std::string text = r.str(kMaxErrorFrameBytes);
    if (code < NPG_INVALID_ARGUMENT || code > NPG_INTERNAL_ERROR) code = NPG_REMOTE_ERROR;
    throw_error(static_cast<npg_result_t>(code), text);
  }
  return body;
}

}  // namespace host
}  // namespace npg

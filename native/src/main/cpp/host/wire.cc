#include "wire.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include <algorithm>

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

uint32_t check_frame_header(const uint8_t header[kFrameHeaderBytes], FrameType expected, size_t max_len,
                            bool retry_allowed, const std::string& peer, FrameType* type) {
  ByteReader hr(header, kFrameHeaderBytes);
  uint32_t magic = hr.u32();
  uint32_t raw_type = hr.u32();
  uint32_t len = hr.u32();
  if (magic != kFrameMagic) throw_error(NPG_REMOTE_ERROR, peer + " sent a frame with a bad magic");
  bool is_error = raw_type == static_cast<uint32_t>(FrameType::kError);
  bool is_retry = retry_allowed && raw_type == static_cast<uint32_t>(FrameType::kRetry);
  if (!is_error && !is_retry && raw_type != static_cast<uint32_t>(expected)) {
    throw_error(NPG_REMOTE_ERROR, peer + " sent an unexpected frame of type " + std::to_string(raw_type));
  }
  size_t limit = is_error ? kMaxErrorFrameBytes : is_retry ? 0 : max_len;
  if (len > limit) {
    throw_error(NPG_REMOTE_ERROR,
                peer + " sent a frame of " + std::to_string(len) + " bytes (limit " + std::to_string(limit) + ")");
  }
  *type = static_cast<FrameType>(raw_type);
  return len;
}

void throw_error_frame(const std::vector<uint8_t>& body) {
  ByteReader r(body);
  uint32_t code = r.u32();
  std::string text = r.str(kMaxErrorFrameBytes);
  if (code < NPG_INVALID_ARGUMENT || code > NPG_INTERNAL_ERROR) code = NPG_REMOTE_ERROR;
  throw_error(static_cast<npg_result_t>(code), text);
}

std::vector<uint8_t> recv_frame(int fd, FrameType expected, size_t max_len, const Deadline& deadline, int cancel_fd,
                                const std::string& peer) {
  uint8_t header[kFrameHeaderBytes];
  recv_all(fd, header, sizeof(header), deadline, cancel_fd, peer);
  FrameType type;
  uint32_t len = check_frame_header(header, expected, max_len, false, peer, &type);
  std::vector<uint8_t> body(len);
  recv_all(fd, body.data(), len, deadline, cancel_fd, peer);
  if (type == FrameType::kError) throw_error_frame(body);
  return body;
}

void FrameAssembler::reset() {
  header_got_ = 0;
  body_.clear();
  body_got_ = 0;
  have_header_ = false;
}

bool FrameAssembler::begins(FrameType expected) const {
  if (have_header_) return type_ == expected;
  if (header_got_ == 0) return false;
  ByteWriter w;
  w.u32(kFrameMagic);
  w.u32(static_cast<uint32_t>(expected));
  const size_t n = std::min(header_got_, w.data().size());
  return memcmp(header_, w.data().data(), n) == 0;
}

FrameAssembler::Status FrameAssembler::read_some(int fd, FrameType expected, size_t max_len, bool retry_allowed,
                                                 const std::string& peer) {
  for (;;) {
    uint8_t* into;
    size_t want;
    if (!have_header_) {
      into = header_ + header_got_;
      want = kFrameHeaderBytes - header_got_;
    } else {
      into = body_.data() + body_got_;
      want = body_.size() - body_got_;
    }
    if (want > 0) {
      ssize_t n = ::recv(fd, into, want, 0);
      if (n == 0) return Status::kClosed;
      if (n < 0) {
        int err = errno;
        if (err == EINTR) continue;
        if (err == EAGAIN || err == EWOULDBLOCK) return Status::kIncomplete;
        if (err == ECONNRESET || err == EPIPE || err == ENOTCONN || err == ETIMEDOUT) return Status::kClosed;
        throw_system_error("recv from " + peer, err);
      }
      (have_header_ ? body_got_ : header_got_) += static_cast<size_t>(n);
    }
    if (!have_header_) {
      if (header_got_ < kFrameHeaderBytes) continue;
      body_.resize(check_frame_header(header_, expected, max_len, retry_allowed, peer, &type_));
      have_header_ = true;
      continue;
    }
    if (body_got_ < body_.size()) continue;
    if (type_ == FrameType::kError) throw_error_frame(body_);
    return Status::kComplete;
  }
}

}  // namespace host
}  // namespace npg

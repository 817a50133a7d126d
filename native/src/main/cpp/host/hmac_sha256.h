// SHA-256 (FIPS 180-4) and HMAC-SHA-256 (RFC 2104) for the handshakes' challenge-response:
// the communicator secret is proven, never sent.
#ifndef NPUGATHER_HOST_HMAC_SHA256_H_
#define NPUGATHER_HOST_HMAC_SHA256_H_

#include <stddef.h>
#include <stdint.h>

namespace npg {
namespace host {

constexpr size_t kSha256Bytes = 32;

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t len);
  void finish(uint8_t out[kSha256Bytes]);

 private:
  void compress(const uint8_t block[64]);
  uint32_t state_[8];
  uint8_t block_[64];
  size_t block_len_ = 0;
  uint64_t total_bytes_ = 0;
};

// HMAC-SHA-256 over the concatenation of parts.
class HmacSha256 {
 public:
  HmacSha256(const uint8_t* key, size_t key_len);
  HmacSha256& update(const void* data, size_t len) {
    inner_.update(data, len);
    return *this;
  }
  void finish(uint8_t out[kSha256Bytes]);

 private:
  Sha256 inner_;
  uint8_t outer_key_[64];
};

}  // namespace host
}  // namespace npg

#endif  // NPUGATHER_HOST_HMAC_SHA256_H_

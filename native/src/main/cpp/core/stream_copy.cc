#include "stream_copy.h"

#include <string.h>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace npg {

void stream_copy(uint8_t* dst, const uint8_t* src, uint64_t len) noexcept {
#if defined(__x86_64__)
  if (len >= kStreamCopyMinBytes) {
    // Non-temporal stores (SSE2, in every x86-64 CPU) need 16-byte aligned destinations.
    const uint64_t head = (16 - (reinterpret_cast<uintptr_t>(dst) & 15)) & 15;
    memcpy(dst, src, head);
    dst += head;
    src += head;
    len -= head;
    for (; len >= 64; len -= 64, dst += 64, src += 64) {
      const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src));
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 16));
      const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 32));
      const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 48));
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst), a);
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + 16), b);
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + 32), c);
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + 48), d);
    }
    _mm_sfence();  // non-temporal stores are weakly ordered
  }
#endif
  memcpy(dst, src, len);
}

}  // namespace npg

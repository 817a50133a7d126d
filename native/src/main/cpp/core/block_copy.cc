#include "block_copy.h"

#include <string.h>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace npg {
namespace {

#if defined(__x86_64__)

constexpr uintptr_t kPageBytes = 4096;
constexpr uintptr_t kAliasWindowBytes = 128;

// Whether dst lies 1 to kAliasWindowBytes - 1 bytes past src modulo the page: where `rep movsb`
// is slow.
bool nearly_aliased(const uint8_t* dst, const uint8_t* src) {
  const uintptr_t distance = (reinterpret_cast<uintptr_t>(dst) - reinterpret_cast<uintptr_t>(src)) & (kPageBytes - 1);
  return distance != 0 && distance < kAliasWindowBytes;
}

// 64 bytes per step (SSE2, in every x86-64 CPU), all four loads before the stores; forward, so
// that a load never waits on a recent store to the same page offset. Returns the bytes left
// (under 64).
template <bool kStream>
uint64_t copy_lines(uint8_t*& dst, const uint8_t*& src, uint64_t len) {
  for (; len >= 64; len -= 64, dst += 64, src += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 32));
    const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 48));
    if (kStream) {
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst), a);
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + 16), b);
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + 32), c);
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + 48), d);
    } else {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), a);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 16), b);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 32), c);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 48), d);
    }
  }
  return len;
}

#endif

}  // namespace

void copy_block(uint8_t* dst, const uint8_t* src, uint64_t len) noexcept {
#if defined(__x86_64__)
  if (len >= kStreamCopyMinBytes) {
    // Non-temporal stores need 16-byte aligned destinations.
    const uint64_t head = (16 - (reinterpret_cast<uintptr_t>(dst) & 15)) & 15;
    memcpy(dst, src, head);
    dst += head;
    src += head;
    len = copy_lines<true>(dst, src, len - head);
    _mm_sfence();  // non-temporal stores are weakly ordered
  } else if (len >= kAliasedCopyMinBytes && nearly_aliased(dst, src)) {
    len = copy_lines<false>(dst, src, len);
  }
#endif
  memcpy(dst, src, len);
}

}  // namespace npg

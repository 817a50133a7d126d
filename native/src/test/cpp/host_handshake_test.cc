// The challenge-response of the host backend's listeners (host/handshake.h) against
// published test vectors and against a wrong secret on either side or a replayed exchange.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/error.h"
#include "host/handshake.h"
#include "host/hmac_sha256.h"
#include "support/host_test_support.h"

namespace {

using namespace npgtest;
using namespace npg::host;

std::string hex(const uint8_t* p, size_t len) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < len; ++i) {
    out += kHex[p[i] >> 4];
    out += kHex[p[i] & 15];
  }
  return out;
}

std::string sha256_hex(const std::string& text) {
  Sha256 digest;
  digest.update(text.data(), text.size());
  uint8_t out[kSha256Bytes];
  digest.finish(out);
  return hex(out, sizeof(out));
}

std::string hmac_hex(const std::string& key, const std::string& text) {
  HmacSha256 mac(reinterpret_cast<const uint8_t*>(key.data()), key.size());
  mac.update(text.data(), text.size());
  uint8_t out[kSha256Bytes];
  mac.finish(out);
  return hex(out, sizeof(out));
}

void test_sha256_and_hmac_match_published_vectors() {
  // FIPS 180-4 examples and RFC 4231 test cases 1, 2 and 6 (a key longer than a block).
  CHECK(sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  CHECK(sha256_hex(std::string(1000000, 'a')) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  CHECK(hmac_hex(std::string(20, '\x0b'), "Hi There") ==
        "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  CHECK(hmac_hex("Jefe", "what do ya want for nothing?") ==
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  CHECK(hmac_hex(std::string(131, '\xaa'), "Test Using Larger Than Block-Size Key - Hash Key First") ==
        "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

struct Listener {
  UniqueFd fd;
  Endpoint at;
};

Listener loopback_listener() {
  Listener l;
  l.fd = listen_on(parse_address("127.0.0.1"), &l.at);
  return l;
}

HostRootInfo fresh_info(const Endpoint& root) {
  HostRootInfo info;
  fill_random(info.id, kIdBytes);
  fill_random(info.secret, kSecretBytes);
  info.root = root;
  return info;
}

// Runs the connector side to the end on its own thread; returns its error text or "".
std::thread connect_in_background(const Endpoint& to, const HostRootInfo& info, std::string* error) {
  return std::thread([to, info, error] {
    try {
      Deadline d = Deadline::after_ms(3000);
      ClientHandshake h(connect_with_retry(to, d, "acceptor"), to, info, HandshakePurpose::kRing, {1, 2, 3, 4},
                        "acceptor");
      h.finish(d, -1);
    } catch (const npg::Error& e) {
      *error = e.what();
    }
  });
}

void test_both_sides_with_the_secret_complete_and_carry_the_payload() {
  Listener l = loopback_listener();
  HostRootInfo info = fresh_info(l.at);
  std::string error;
  std::thread client = connect_in_background(l.at, info, &error);
  Admission gate(l.fd.get(), info, HandshakePurpose::kRing, 4, "test acceptor");
  AdmittedConnection c = gate.next(Deadline::after_ms(3000), -1, nullptr, "waiting for the connector");
  client.join();
  CHECK(error.empty());
  CHECK(c.fd);
  CHECK((c.payload == std::vector<uint8_t>{1, 2, 3, 4}));
}

void test_a_connector_without_the_secret_is_dropped() {
  Listener l = loopback_listener();
  HostRootInfo info = fresh_info(l.at);
  HostRootInfo impostor = info;
  impostor.secret[0] ^= 1;
  std::string error;
  std::thread client = connect_in_background(l.at, impostor, &error);
  Admission gate(l.fd.get(), info, HandshakePurpose::kRing, 4, "test acceptor");
  bool timed_out = false;
  try {
    gate.next(Deadline::after_ms(500), -1, nullptr, "waiting for the connector");
  } catch (const npg::Error& e) {
    timed_out = e.code() == NPG_TIMEOUT;
  }
  client.join();
  CHECK(timed_out);
  CHECK(contains(gate.drop_summary(), "1 connection"));
  CHECK(contains(error, "closed the connection during the handshake"));
}

void test_an_acceptor_without_the_secret_is_detected() {
  Listener l = loopback_listener();
  HostRootInfo info = fresh_info(l.at);
  HostRootInfo impostor = info;
  impostor.secret[15] ^= 0x80;
  std::string error;
  std::thread client = connect_in_background(l.at, info, &error);
  Admission gate(l.fd.get(), impostor, HandshakePurpose::kRing, 4, "impostor acceptor");
  try {
    gate.next(Deadline::after_ms(500), -1, nullptr, "waiting for the connector");
  } catch (const npg::Error&) {
  }
  client.join();
  // The impostor cannot check the connector's MAC, and the connector would reject its proof.
  CHECK(contains(error, "closed the connection during the handshake") || contains(error, "did not prove"));
}

// Relays one connection between a connector and the acceptor, recording what the connector sent.
std::vector<uint8_t> relay(int client_fd, int server_fd) {
  std::vector<uint8_t> from_client;
  for (;;) {
    pollfd fds[2] = {{client_fd, POLLIN, 0}, {server_fd, POLLIN, 0}};
    if (poll(fds, 2, 2000) <= 0) return from_client;
    uint8_t buf[4096];
    for (int i = 0; i < 2; ++i) {
      if (fds[i].revents == 0) continue;
      ssize_t n = recv(fds[i].fd, buf, sizeof(buf), 0);
      if (n <= 0) return from_client;
      if (i == 0) from_client.insert(from_client.end(), buf, buf + n);
      send(fds[1 - i].fd, buf, n, MSG_NOSIGNAL);
    }
  }
}

void test_a_recorded_handshake_cannot_be_replayed() {
  Listener real = loopback_listener();
  Listener proxy = loopback_listener();
  HostRootInfo info = fresh_info(real.at);
  std::string error;
  std::thread client = connect_in_background(proxy.at, info, &error);
  std::vector<uint8_t> recorded;
  std::thread relay_thread([&] {
    Deadline d = Deadline::after_ms(3000);
    UniqueFd from = accept_one(proxy.fd.get(), d, -1, "relay");
    UniqueFd to = connect_with_retry(real.at, d, "acceptor");
    recorded = relay(from.get(), to.get());
  });
  Admission gate(real.fd.get(), info, HandshakePurpose::kRing, 4, "test acceptor");
  AdmittedConnection genuine = gate.next(Deadline::after_ms(3000), -1, nullptr, "waiting for the connector");
  client.join();
  genuine.fd.reset();
  relay_thread.join();
  CHECK(error.empty());
  CHECK(recorded.size() > kFrameHeaderBytes);
  // The replay gets a new challenge, answers with the old nonce's MAC, and is dropped.
  UniqueFd replay = connect_with_retry(real.at, Deadline::after_ms(1000), "acceptor");
  CHECK(send(replay.get(), recorded.data(), recorded.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(recorded.size()));
  bool admitted = true;
  try {
    gate.next(Deadline::after_ms(500), -1, nullptr, "waiting for the replay");
  } catch (const npg::Error& e) {
    admitted = e.code() != NPG_TIMEOUT;
  }
  CHECK(!admitted);
  CHECK(contains(gate.drop_summary(), "1 connection"));
}

const TestCase kTests[] = {
    {"sha256_and_hmac_match_published_vectors", test_sha256_and_hmac_match_published_vectors},
    {"both_sides_with_the_secret_complete_and_carry_the_payload",
     test_both_sides_with_the_secret_complete_and_carry_the_payload},
    {"a_connector_without_the_secret_is_dropped", test_a_connector_without_the_secret_is_dropped},
    {"an_acceptor_without_the_secret_is_detected", test_an_acceptor_without_the_secret_is_detected},
    {"a_recorded_handshake_cannot_be_replayed", test_a_recorded_handshake_cannot_be_replayed},
};

}  // namespace

int main(int argc, char** argv) { return run_tests(argc, argv, kTests, host_run_options()); }

#include "rank_table.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#include <algorithm>
#include <memory>
#include <utility>

#include "../core/error.h"

namespace npg {
namespace hccl {
namespace {

constexpr size_t kMaxFileBytes = 16u << 20;
constexpr int kMaxDepth = 32;

// Just enough JSON for the rank table: objects, arrays, strings, numbers, literals.
struct Json {
  enum Kind { kNull, kBool, kNumber, kString, kArray, kObject } kind = kNull;
  std::string text;  // string value, or the number's literal
  std::vector<Json> items;
  std::vector<std::pair<std::string, Json>> members;

  const Json* member(const std::string& key) const {
    for (const auto& m : members)
      if (m.first == key) return &m.second;
    return nullptr;
  }
};

class Parser {
 public:
  Parser(const std::string& path, const std::string& text) : path_(path), s_(text) {}

  Json parse_document() {
    Json v = value(0);
    skip_space();
    if (pos_ != s_.size()) fail("unexpected text after the JSON value");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    size_t line = 1;
    for (size_t i = 0; i < pos_ && i < s_.size(); ++i) line += s_[i] == '\n';
    throw_error(NPG_INVALID_ARGUMENT, "rank table " + path_ + " is not valid JSON: " + what + " at line " +
                                          std::to_string(line) + " (byte " + std::to_string(pos_) + ")");
  }

  void skip_space() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }

  bool literal(const char* word) {
    size_t n = std::char_traits<char>::length(word);
    if (s_.compare(pos_, n, word) != 0) return false;
    pos_ += n;
    return true;
  }

  Json value(int depth) {
    if (depth > kMaxDepth) fail("nesting deeper than " + std::to_string(kMaxDepth));
    skip_space();
    if (pos_ >= s_.size()) fail("unexpected end of file");
    Json v;
    char c = s_[pos_];
    if (c == '{') {
      v.kind = Json::kObject;
      ++pos_;
      skip_space();
      if (pos_ < s_.size() && s_[pos_] == '}') {
        ++pos_;
        return v;
      }
      for (;;) {
        skip_space();
        if (pos_ >= s_.size() || s_[pos_] != '"') fail("expected a quoted key");
        std::string key = string_body();
        skip_space();
        if (pos_ >= s_.size() || s_[pos_] != ':') fail("expected ':' after key \"" + key + "\"");
        ++pos_;
        v.members.emplace_back(key, value(depth + 1));
        skip_space();
        if (pos_ < s_.size() && s_[pos_] == ',') {
          ++pos_;
          continue;
        }
        if (pos_ < s_.size() && s_[pos_] == '}') {
          ++pos_;
          return v;
        }
        fail("expected ',' or '}' in an object");
      }
    }
    if (c == '[') {
      v.kind = Json::kArray;
      ++pos_;
      skip_space();
      if (pos_ < s_.size() && s_[pos_] == ']') {
        ++pos_;
        return v;
      }
      for (;;) {
        v.items.push_back(value(depth + 1));
        skip_space();
        if (pos_ < s_.size() && s_[pos_] == ',') {
          ++pos_;
          continue;
        }
        if (pos_ < s_.size() && s_[pos_] == ']') {
          ++pos_;
          return v;
        }
        fail("expected ',' or ']' in an array");
      }
    }
    if (c == '"') {
      v.kind = Json::kString;
      v.text = string_body();
      return v;
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
      v.kind = Json::kNumber;
      size_t start = pos_;
      while (pos_ < s_.size() && (isdigit(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '-' || s_[pos_] == '+' ||
                                  s_[pos_] == '.' || s_[pos_] == 'e' || s_[pos_] == 'E'))
        ++pos_;
      v.text = s_.substr(start, pos_ - start);
      return v;
    }
    if (literal("true") || literal("false")) {
      v.kind = Json::kBool;
      return v;
    }
    if (literal("null")) return v;
    fail(std::string("unexpected character '") + c + "'");
  }

  std::string string_body() {
    ++pos_;  // opening quote
    std::string out;
    while (pos_ < s_.size()) {
      char c = s_[pos_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character inside a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= s_.size()) break;
      char e = s_[pos_++];
      switch (e) {
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case '/':
          out += '/';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u':
          if (pos_ + 4 > s_.size()) fail("truncated \\u escape");
          out += '?';  // no field we read holds non-ASCII text
          pos_ += 4;
          break;
        default:
          fail(std::string("unknown escape \\") + e);
      }
    }
    fail("unterminated string");
  }

  const std::string& path_;
  const std::string& s_;
  size_t pos_ = 0;
};

[[noreturn]] void invalid(const std::string& path, const std::string& what) {
  throw_error(NPG_INVALID_ARGUMENT, "rank table " + path + ": " + what);
}

const char* kind_name(Json::Kind kind) {
  static const char* const kKinds[] = {"null", "a boolean", "a number", "a string", "an array", "an object"};
  return kKinds[kind];
}

const Json& require(const std::string& path, const Json& obj, const std::string& key, Json::Kind kind,
                    const std::string& where) {
  const Json* v = obj.member(key);
  if (v == nullptr) invalid(path, where + " has no \"" + key + "\"");
  if (v->kind != kind) {
    invalid(path, "\"" + key + "\" of " + where + " must be " + kind_name(kind) + ", found " + kind_name(v->kind));
  }
  return *v;
}

// HCCL reads every scalar field of the table as a JSON string: any other type, a number
// included, is HCCL_E_PARA ("is not string"). value is the member key of obj, present.
const std::string& string_field(const std::string& path, const Json& value, const std::string& key,
                                const std::string& where) {
  if (value.kind != Json::kString) {
    invalid(path, "\"" + key + "\" of " + where + " must be a JSON string such as \"1\", found " +
                      kind_name(value.kind) + (value.kind == Json::kNumber ? " (" + value.text + ")" : "") +
                      "; HCCL refuses any other type (HCCL_E_PARA, \"is not string\")");
  }
  return value.text;
}

// A non-negative decimal integer in a string ("3"), as HCCL's SalStrToULong reads rank_id,
// device_id and server_count.
int64_t decimal_of(const std::string& path, const Json& value, const std::string& key, const std::string& where) {
  const std::string& t = string_field(path, value, key, where);
  bool digits = !t.empty() && t.size() <= 9;
  for (char c : t) digits = digits && c >= '0' && c <= '9';
  if (!digits) invalid(path, where + "." + key + " \"" + t + "\" is not a non-negative integer");
  return strtoll(t.c_str(), nullptr, 10);
}

}  // namespace

RankTableFile parse_rank_table(const std::string& path, const std::string& text, int32_t rank, int32_t rank_size) {
  Json root = Parser(path, text).parse_document();
  if (root.kind != Json::kObject) invalid(path, "the top level must be a JSON object");
  RankTableFile table;
  table.path = path;
  table.version = require(path, root, "version", Json::kString, "the top level").text;
  if (table.version != "1.0" && table.version != "1.2") {
    invalid(path, "version \"" + table.version + "\" is not supported; allowed values: \"1.0\", \"1.2\"");
  }
  const std::string& status = require(path, root, "status", Json::kString, "the top level").text;
  if (status != "completed") {
    invalid(path, "status is \"" + status + "\"; the table is usable only when status is \"completed\"");
  }
  const Json& servers = require(path, root, "server_list", Json::kArray, "the top level");
  if (servers.items.empty()) invalid(path, "server_list is empty");
  std::vector<RankTableDevice> found;
  for (size_t s = 0; s < servers.items.size(); ++s) {
    const Json& server = servers.items[s];
    std::string where = "server_list[" + std::to_string(s) + "]";
    if (server.kind != Json::kObject) invalid(path, where + " must be an object");
    const Json& devices = require(path, server, "device", Json::kArray, where);
    if (devices.items.empty()) invalid(path, where + ".device is empty; every server lists its devices");
    for (size_t d = 0; d < devices.items.size(); ++d) {
      const Json& dev = devices.items[d];
      std::string dwhere = where + ".device[" + std::to_string(d) + "]";
      if (dev.kind != Json::kObject) invalid(path, dwhere + " must be an object");
      const Json* rid = dev.member("rank_id");
      if (rid == nullptr) invalid(path, dwhere + " has no \"rank_id\"");
      const Json* did = dev.member("device_id");
      if (did == nullptr) invalid(path, dwhere + " has no \"device_id\"");
      RankTableDevice entry;
      entry.rank_id = static_cast<int32_t>(decimal_of(path, *rid, "rank_id", dwhere));
      entry.device_id = std::to_string(decimal_of(path, *did, "device_id", dwhere));
      entry.server_index = static_cast<int32_t>(s);
      found.push_back(entry);
    }
    // HCCL needs every server named, once.
    const std::string& server_id = require(path, server, "server_id", Json::kString, where).text;
    if (server_id.empty() || server_id.size() > 64) {
      invalid(path, where + ".server_id \"" + server_id + "\" must have 1 to 64 characters");
    }
    for (size_t t = 0; t < s; ++t) {
      if (table.server_ids[t] == server_id) {
        invalid(path, where + ".server_id \"" + server_id + "\" is the same as server_list[" + std::to_string(t) +
                          "]'s; every server appears once");
      }
    }
    table.server_ids.push_back(server_id);
  }
  for (RankTableDevice& e : found) e.server_id = table.server_ids[e.server_index];
  // server_count is optional (HCCL then counts server_list); when present, a string that counts it.
  const Json* count = root.member("server_count");
  if (count != nullptr &&
      decimal_of(path, *count, "server_count", "the top level") != static_cast<int64_t>(servers.items.size())) {
    invalid(path, "server_count \"" + count->text + "\" does not match server_list, which lists " +
                      std::to_string(servers.items.size()) + " server(s)");
  }
  if (static_cast<int64_t>(found.size()) != rank_size) {
    invalid(path, "lists " + std::to_string(found.size()) + " devices but rank_size is " + std::to_string(rank_size));
  }
  table.devices.assign(found.size(), RankTableDevice());
  for (const RankTableDevice& e : found) {
    if (e.rank_id >= rank_size) {
      invalid(path, "rank_id " + std::to_string(e.rank_id) + " is out of range [0, " + std::to_string(rank_size - 1) +
                        "]; rank ids must be 0..n-1");
    }
    if (table.devices[e.rank_id].rank_id >= 0) {
      invalid(path, "rank_id " + std::to_string(e.rank_id) + " appears more than once (server \"" +
                        table.devices[e.rank_id].server_id + "\" and server \"" + e.server_id + "\")");
    }
    table.devices[e.rank_id] = e;
  }
  // HCCL does not let rank ids cross servers: each server's ids form one range ({0,1,2,3} and
  // {4,5,6,7}, never {0,1,2,7} and {3,4,5,6}).
  std::vector<int32_t> lo(servers.items.size(), INT32_MAX), hi(servers.items.size(), -1), n(servers.items.size(), 0);
  for (const RankTableDevice& e : table.devices) {
    lo[e.server_index] = std::min(lo[e.server_index], e.rank_id);
    hi[e.server_index] = std::max(hi[e.server_index], e.rank_id);
    ++n[e.server_index];
  }
  for (size_t s = 0; s < servers.items.size(); ++s) {
    if (n[s] > 0 && hi[s] - lo[s] + 1 != n[s]) {
      invalid(path, "rank ids interleave across servers: server \"" + table.server_ids[s] + "\" has " +
                        std::to_string(n[s]) + " ranks between rank_id " + std::to_string(lo[s]) + " and " +
                        std::to_string(hi[s]) + "; give each server a contiguous range of rank ids");
    }
  }
  // With rank_size unique ids in [0, rank_size) every rank, this one included, is present.
  if (rank < 0 || rank >= rank_size || table.devices[rank].rank_id != rank) {
    invalid(path, "this rank " + std::to_string(rank) + " is not in the table");
  }
  return table;
}

void check_rank_device(const RankTableFile& table, int32_t rank, int32_t device_id) {
  // The table holds physical device ids; device_id is logical, the same unless
  // ASCEND_RT_VISIBLE_DEVICES remaps them.
  int64_t physical = device_id;
  std::string how = "device_id " + std::to_string(device_id);
  const char* visible = getenv("ASCEND_RT_VISIBLE_DEVICES");
  if (visible != nullptr && visible[0] != '\0') {
    std::string list = visible;
    size_t at = 0;
    for (int32_t i = 0; i < device_id && at != std::string::npos; ++i) {
      at = list.find(',', at);
      if (at != std::string::npos) ++at;
    }
    if (at == std::string::npos || at >= list.size()) {
      invalid(table.path, "device_id " + std::to_string(device_id) + " is not in ASCEND_RT_VISIBLE_DEVICES=" + list);
    }
    physical = strtoll(list.c_str() + at, nullptr, 10);
    how += " (physical " + std::to_string(physical) + " through ASCEND_RT_VISIBLE_DEVICES=" + list + ")";
  }
  const RankTableDevice& mine = table.devices[rank];
  if (mine.device_id != std::to_string(physical)) {
    invalid(table.path, "rank_id " + std::to_string(rank) + " on server \"" + mine.server_id + "\" has device_id \"" +
                            mine.device_id + "\", but this rank binds " + how +
                            "; the table's device_id of each rank must be the device that rank runs on");
  }
}

RankTableFile load_rank_table(const std::string& path, int32_t rank, int32_t rank_size) {
  char resolved[PATH_MAX];
  if (realpath(path.c_str(), resolved) == nullptr) {
    int err = errno;
    throw_error(NPG_INVALID_ARGUMENT, "rank_table_file " + path + " cannot be opened: " + errno_text(err));
  }
  std::unique_ptr<FILE, int (*)(FILE*)> file(fopen(resolved, "rb"), &fclose);
  if (!file) {
    int err = errno;
    throw_error(NPG_INVALID_ARGUMENT,
                "rank_table_file " + std::string(resolved) + " cannot be read: " + errno_text(err));
  }
  std::string text;
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), file.get())) > 0) {
    text.append(buf, n);
    if (text.size() > kMaxFileBytes) invalid(resolved, "is larger than 16 MiB");
  }
  if (ferror(file.get())) throw_system_error("reading rank_table_file " + std::string(resolved), EIO);
  return parse_rank_table(resolved, text, rank, rank_size);
}

}  // namespace hccl
}  // namespace npg

// A JSON (RFC 8259) tokenizer over a ByteSource, handing each token to a SAX handler as it is read:
// null(), boolean(b), number_integer(int64), number_unsigned(uint64), number_float(double),
// string(view), key(view), start_object(), end_object(), start_array(), end_array(). Views last until
// the next call. It accepts exactly what nlohmann-json's parser accepts and types numbers as it does
// (a non-negative integer is unsigned, a negative one signed, either falls back to double when it does
// not fit), so the trace reader keeps the DOM reader's semantics. Hand-written because nlohmann's lexer
// reads one character at a time and copies every token: most of a read's time through its SAX parser
// (bench/results/2026-12-02-cpu-trace-reader). Strings without escapes inside one chunk are handed over
// in place; the rest go through a scratch buffer.
#pragma once

#include "core/error.h"
#include "core/limits.h"
#include "profiler/trace/byte_source.h"

#include <fmt/format.h>

#include <bit>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace k3::profiler {

// The first byte in [p, end) that ends a plain run of a string: '"', '\\', a control byte (< 0x20) or a
// non-ASCII one (>= 0x80); `end` if none. Eight bytes at a time: names run to hundreds of bytes.
inline const char* find_string_special(const char* p, const char* end) {
  constexpr std::uint64_t kOnes = 0x0101010101010101, kHighs = 0x8080808080808080;
  const auto zero_bytes = [](std::uint64_t x) { return (x - kOnes) & ~x; };  // exact up to the first zero
  for (; end - p >= 8; p += 8) {
    std::uint64_t v;
    std::memcpy(&v, p, 8);
    const std::uint64_t hits =
        (zero_bytes(v ^ (kOnes * '"')) | zero_bytes(v ^ (kOnes * '\\')) | ((v - kOnes * 0x20) & ~v) | v) & kHighs;
    if (hits) {
      if constexpr (std::endian::native == std::endian::little) return p + std::countr_zero(hits) / 8;
      return p + std::countl_zero(hits) / 8;
    }
  }
  for (; p < end; ++p) {
    const unsigned char c = static_cast<unsigned char>(*p);
    if (c == '"' || c == '\\' || c < 0x20 || c >= 0x80) return p;
  }
  return end;
}

template <typename Handler>
class JsonTokenizer {
 public:
  static constexpr std::size_t kChunkBytes = std::size_t{1} << 18;

  JsonTokenizer(ByteSource& in, Handler& handler, const std::string& origin)
      : in_(in), handler_(handler), origin_(origin), buffer_(kChunkBytes), pos_(buffer_.data()), end_(pos_) {}

  // The whole document; InputError "<origin>: malformed JSON at byte N: ..." at the first error.
  void parse() {
    if (peek() == 0xEF) {  // a UTF-8 byte order mark
      ++pos_;
      if (get() != 0xBB || get() != 0xBF) fail("invalid byte order mark");
    }
    values();
    skip_whitespace();
    // nlohmann takes a NUL byte for the end of input (as at the end of a C string).
    if (peek() != kEnd && peek() != 0) fail("expected the end of input");
  }

 private:
  static constexpr int kEnd = -1;

  bool fill() {
    if (ended_) return false;
    consumed_ += static_cast<std::size_t>(end_ - buffer_.data());
    const std::size_t n = in_.read(buffer_.data(), buffer_.size());
    pos_ = buffer_.data();
    end_ = pos_ + n;
    ended_ = n == 0;
    return n > 0;
  }
  int peek() {
    if (pos_ == end_ && !fill()) return kEnd;
    return static_cast<unsigned char>(*pos_);
  }
  int get() {
    const int c = peek();
    if (c != kEnd) ++pos_;
    return c;
  }
  // The 1-based offset of the byte at pos_ (of the end + 1 at the end).
  std::size_t byte() const { return consumed_ + static_cast<std::size_t>(pos_ - buffer_.data()) + 1; }

  [[noreturn]] void fail(const std::string& what) const {
    throw InputError(fmt::format("{}: malformed JSON at byte {}: {}", origin_, byte(), what));
  }
  [[noreturn]] void fail_at_previous(const std::string& what) {
    --pos_;  // the byte just read is the culprit; pos_ stays in the buffer it was read from
    fail(what);
  }

  void skip_whitespace() {
    while (true) {
      if (pos_ == end_ && !fill()) return;
      const char c = *pos_;
      if (c != ' ' && c != '\n' && c != '\r' && c != '\t') return;
      ++pos_;
    }
  }

  // Every value of the document, without recursion: `open_` holds the containers entered.
  void values() {
    enum class Next { value, key, after_value } next = Next::value;
    while (true) {
      if (next == Next::key) {
        skip_whitespace();
        if (get() != '"') fail_or_end("expected a string as an object's key");
        handler_.key(string());
        skip_whitespace();
        if (get() != ':') fail_or_end("expected ':' after an object's key");
        next = Next::value;
        continue;
      }
      if (next == Next::after_value) {
        if (open_.empty()) return;
        skip_whitespace();
        const int c = get();
        const bool object = open_.back();
        if (c == ',') {
          next = object ? Next::key : Next::value;
        } else if (c == (object ? '}' : ']')) {
          open_.pop_back();
          object ? handler_.end_object() : handler_.end_array();
        } else {
          fail_or_end(object ? "expected ',' or '}' after an object's member" : "expected ',' or ']' after an element");
        }
        continue;
      }
      skip_whitespace();
      const int c = peek();
      next = Next::after_value;
      switch (c) {
        case '{':
        case '[': {
          // Bounded like every JSON input (core/limits.h): a handler keeping a deep value whole would recurse.
          if (open_.size() >= static_cast<std::size_t>(limit::nesting.value)) {
            fail(fmt::format("nested deeper than {} levels", limit::nesting.value));
          }
          ++pos_;
          const bool object = c == '{';
          object ? handler_.start_object() : handler_.start_array();
          skip_whitespace();
          if (peek() == (object ? '}' : ']')) {
            ++pos_;
            object ? handler_.end_object() : handler_.end_array();
          } else {
            open_.push_back(object);
            next = object ? Next::key : Next::value;
          }
          break;
        }
        case '"':
          ++pos_;
          handler_.string(string());
          break;
        case 't':
          literal("true");
          handler_.boolean(true);
          break;
        case 'f':
          literal("false");
          handler_.boolean(false);
          break;
        case 'n':
          literal("null");
          handler_.null();
          break;
        default:
          if (c == '-' || (c >= '0' && c <= '9')) {
            number();
          } else {
            fail(c == kEnd ? "unexpected end of input; expected a value" : "expected a value");
          }
      }
    }
  }

  [[noreturn]] void fail_or_end(const char* what) {
    if (pos_ == end_ && ended_) fail(std::string("unexpected end of input; ") + what);
    fail_at_previous(what);
  }

  void literal(std::string_view word) {
    for (const char expected : word) {
      if (get() != expected) fail_or_end("invalid literal");
    }
  }

  // After the opening quote: the string's bytes, unescaped, as UTF-8 checked as nlohmann checks it.
  std::string_view string() {
    const char* start = pos_;
    const char* special = find_string_special(pos_, end_);
    if (special < end_ && *special == '"') {  // in place: no escape, no control or non-ASCII byte
      pos_ = special + 1;
      return std::string_view(start, static_cast<std::size_t>(special - start));
    }
    scratch_.clear();
    while (true) {
      const char* run = pos_;
      pos_ = find_string_special(pos_, end_);
      scratch_.append(run, static_cast<std::size_t>(pos_ - run));
      const int c = get();
      if (c == kEnd) fail("unexpected end of input in a string");
      if (c == '"') return scratch_;
      if (c == '\\') {
        escape();
      } else if (c < 0x20) {
        fail_at_previous("control characters in strings must be escaped");
      } else if (c >= 0x80) {
        utf8_sequence(c);
      } else {  // the first byte of a new chunk
        scratch_ += static_cast<char>(c);
      }
    }
  }

  void escape() {
    const int c = get();
    switch (c) {
      case '"': scratch_ += '"'; return;
      case '\\': scratch_ += '\\'; return;
      case '/': scratch_ += '/'; return;
      case 'b': scratch_ += '\b'; return;
      case 'f': scratch_ += '\f'; return;
      case 'n': scratch_ += '\n'; return;
      case 'r': scratch_ += '\r'; return;
      case 't': scratch_ += '\t'; return;
      case 'u': break;
      default: fail_or_end("invalid escape in a string");
    }
    std::uint32_t code = hex4();
    if (code >= 0xDC00 && code <= 0xDFFF) fail_at_previous("a low surrogate \\u must follow a high one");
    if (code >= 0xD800 && code <= 0xDBFF) {
      if (get() != '\\' || get() != 'u') fail_or_end("a high surrogate \\u must be followed by a low one");
      const std::uint32_t low = hex4();
      if (low < 0xDC00 || low > 0xDFFF) fail_at_previous("a high surrogate \\u must be followed by a low one");
      code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
    }
    append_utf8(code);
  }

  std::uint32_t hex4() {
    std::uint32_t code = 0;
    for (int i = 0; i < 4; ++i) {
      const int c = get();
      int digit = -1;
      if (c >= '0' && c <= '9') digit = c - '0';
      if (c >= 'a' && c <= 'f') digit = c - 'a' + 10;
      if (c >= 'A' && c <= 'F') digit = c - 'A' + 10;
      if (digit < 0) fail_or_end("\\u must be followed by 4 hex digits");
      code = code * 16 + static_cast<std::uint32_t>(digit);
    }
    return code;
  }

  void append_utf8(std::uint32_t code) {
    if (code < 0x80) {
      scratch_ += static_cast<char>(code);
    } else if (code < 0x800) {
      scratch_ += static_cast<char>(0xC0 | (code >> 6));
      scratch_ += static_cast<char>(0x80 | (code & 0x3F));
    } else if (code < 0x10000) {
      scratch_ += static_cast<char>(0xE0 | (code >> 12));
      scratch_ += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      scratch_ += static_cast<char>(0x80 | (code & 0x3F));
    } else {
      scratch_ += static_cast<char>(0xF0 | (code >> 18));
      scratch_ += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
      scratch_ += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      scratch_ += static_cast<char>(0x80 | (code & 0x3F));
    }
  }

  // A multi-byte UTF-8 sequence whose lead byte `lead` was read: the well-formed ranges of RFC 3629.
  void utf8_sequence(int lead) {
    int continuation = 0, low = 0x80, high = 0xBF;  // the range of the first continuation byte
    if (lead >= 0xC2 && lead <= 0xDF) {
      continuation = 1;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      continuation = 2;
      if (lead == 0xE0) low = 0xA0;
      if (lead == 0xED) high = 0x9F;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      continuation = 3;
      if (lead == 0xF0) low = 0x90;
      if (lead == 0xF4) high = 0x8F;
    } else {
      fail_at_previous("ill-formed UTF-8 byte");
    }
    scratch_ += static_cast<char>(lead);
    for (int i = 0; i < continuation; ++i) {
      const int c = get();
      if (c < low || c > high) fail_or_end("ill-formed UTF-8 byte");
      scratch_ += static_cast<char>(c);
      low = 0x80;
      high = 0xBF;
    }
  }

  // A number: its characters (in place when they lie in one chunk), checked against the grammar
  // -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? and handed over as integer or double.
  void number() {
    const auto number_char = [](char c) {
      return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E';
    };
    const char* p = pos_;
    while (p < end_ && number_char(*p)) ++p;
    std::string_view text;
    const std::size_t start_byte = byte();
    if (p < end_) {
      text = std::string_view(pos_, static_cast<std::size_t>(p - pos_));
      pos_ = p;
    } else {  // the number may go on in the next chunk
      scratch_.assign(pos_, end_);
      pos_ = end_;
      while (peek() != kEnd && number_char(*pos_)) scratch_ += *pos_++;
      text = scratch_;
    }
    convert(text, start_byte);
  }

  // One pass over a number's characters: the grammar, and its digits as a decimal mantissa with a power
  // of ten. Integers are exact in 64 bits or become doubles; a double whose mantissa is at most 2^53 and
  // whose power of ten is within 10^+-22 is one correctly rounded product or quotient of two exact
  // doubles (Clinger's fast path), the value strtod gives; the rest go through from_chars.
  void convert(std::string_view text, std::size_t start_byte) {
    std::size_t i = 0;
    std::uint64_t mantissa = 0;
    bool mantissa_fits = true;  // every digit is in `mantissa`
    int fraction_digits = 0;
    const auto digits = [&](bool fraction) {
      const std::size_t from = i;
      for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
        const std::uint64_t digit = static_cast<std::uint64_t>(text[i] - '0');
        if (mantissa > (UINT64_MAX - digit) / 10) mantissa_fits = false;
        if (!mantissa_fits) continue;
        mantissa = mantissa * 10 + digit;
        fraction_digits += fraction;
      }
      return i > from;
    };
    const bool negative = text[0] == '-';
    if (negative) ++i;
    bool ok = i < text.size();
    if (ok && text[i] == '0') {
      ++i;
    } else {
      ok = ok && digits(false);
    }
    bool integer = true;
    if (ok && i < text.size() && text[i] == '.') {
      ++i;
      integer = false;
      ok = digits(true);
    }
    int exponent = 0;
    if (ok && i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
      ++i;
      integer = false;
      const bool exponent_negative = i < text.size() && text[i] == '-';
      if (i < text.size() && (text[i] == '+' || text[i] == '-')) ++i;
      const std::size_t from = i;
      for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
        exponent = std::min(exponent * 10 + (text[i] - '0'), 100'000);  // beyond any double
      }
      ok = i > from;
      if (exponent_negative) exponent = -exponent;
    }
    if (!ok || i != text.size()) {
      throw InputError(fmt::format("{}: malformed JSON at byte {}: invalid number '{}'", origin_,
                                   start_byte + std::min(i, text.size()), text));
    }
    if (integer && mantissa_fits) {
      if (!negative) return handler_.number_unsigned(mantissa);
      if (mantissa <= std::uint64_t{1} << 63) return handler_.number_integer(static_cast<std::int64_t>(0 - mantissa));
    }
    static constexpr double kPowersOfTen[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                              1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    const int power = exponent - fraction_digits;
    double x = 0;
    if (mantissa_fits && mantissa <= std::uint64_t{1} << 53 && power >= -22 && power <= 22) {
      const double m = static_cast<double>(mantissa);
      x = power < 0 ? m / kPowersOfTen[-power] : m * kPowersOfTen[power];
      if (negative) x = -x;
    } else {
      const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), x);
      if (error != std::errc() || end != text.data() + text.size()) {  // out of range: as strtod rounds it
        x = std::strtod(std::string(text).c_str(), nullptr);
      }
    }
    if (!std::isfinite(x)) {
      throw InputError(fmt::format("{}: malformed JSON at byte {}: number overflow '{}'", origin_, start_byte, text));
    }
    handler_.number_float(x);
  }

  ByteSource& in_;
  Handler& handler_;
  const std::string& origin_;
  std::vector<char> buffer_;
  const char* pos_;
  const char* end_;
  std::size_t consumed_ = 0;  // bytes before the buffer's first
  bool ended_ = false;
  std::vector<bool> open_;  // the containers entered: true for an object
  std::string scratch_;     // a string with escapes, or a number across chunks
};

}  // namespace k3::profiler

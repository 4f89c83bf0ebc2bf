#pragma once
// Cuts a byte stream (a child's output) into lines as it arrives.
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace hf {

/// Splits bytes fed in any pieces into lines without their terminator ("\n" or "\r\n").
/// A line longer than `max_line_bytes` (at least 4) goes out in pieces of at most that many
/// bytes, never cut inside a UTF-8 sequence, even before its end has arrived. Not thread-safe.
class LineSplitter {
 public:
  LineSplitter(std::size_t max_line_bytes, std::function<void(std::string)> on_line);

  /// Takes the next bytes of the stream; calls on_line for each line they complete.
  void Feed(std::string_view bytes);
  /// The stream has ended: a last unterminated line, if any, goes out.
  void Finish();

 private:
  std::size_t Cut(std::string_view s) const;
  void EmitPieces(std::string_view line);

  const std::size_t max_;
  const std::function<void(std::string)> on_line_;
  std::string buffer_;
};

}  // namespace hf

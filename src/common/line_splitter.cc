#include "hyperfleet/common/line_splitter.h"

#include <algorithm>
#include <utility>

namespace hf {

LineSplitter::LineSplitter(std::size_t max_line_bytes, std::function<void(std::string)> on_line)
    : max_(std::max<std::size_t>(max_line_bytes, 4)), on_line_(std::move(on_line)) {}

void LineSplitter::Feed(std::string_view bytes) {
  buffer_.append(bytes);
  std::size_t start = 0;
  for (std::size_t nl; (nl = buffer_.find('\n', start)) != std::string::npos; start = nl + 1) {
    std::string_view line = std::string_view(buffer_).substr(start, nl - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    EmitPieces(line);
  }
  buffer_.erase(0, start);
  // An unterminated line over the limit goes out in pieces now.
  while (buffer_.size() > max_) {
    const std::size_t cut = Cut(buffer_);
    on_line_(buffer_.substr(0, cut));
    buffer_.erase(0, cut);
  }
}

void LineSplitter::Finish() {
  if (!buffer_.empty()) {
    std::string_view line = buffer_;
    if (line.back() == '\r') line.remove_suffix(1);
    EmitPieces(line);
  }
  buffer_.clear();
}

// Longest prefix of at most max_ bytes that does not end inside a UTF-8 sequence.
std::size_t LineSplitter::Cut(std::string_view s) const {
  const std::size_t cut = std::min(max_, s.size());
  if (cut == s.size()) return cut;
  std::size_t back = cut;
  // Step back over continuation bytes (10xxxxxx) to the lead byte, at most 3.
  while (back > 0 && cut - back < 3 && (static_cast<unsigned char>(s[back]) & 0xC0) == 0x80) {
    --back;
  }
  return back > 0 ? back : cut;
}

void LineSplitter::EmitPieces(std::string_view line) {
  if (line.empty()) {
    on_line_(std::string());
    return;
  }
  while (!line.empty()) {
    const std::size_t cut = Cut(line);
    on_line_(std::string(line.substr(0, cut)));
    line.remove_prefix(cut);
  }
}

}  // namespace hf

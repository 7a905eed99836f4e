#include "core/png.h"

#include <algorithm>
#include <array>
#include <map>

#include "absl/strings/ascii.h"

namespace ddplab {
namespace {

// 5x7 glyphs, one byte a row, bit 4 the leftmost pixel (the classic HD44780 shapes).
const std::map<char, std::array<uint8_t, 7>>& Glyphs() {
  static const auto* glyphs = new std::map<char, std::array<uint8_t, 7>>{
      {'A', {0x0E, 0x11, 0x11, 0x1F, 0x11, 0x11, 0x11}}, {'B', {0x1E, 0x11, 0x11, 0x1E, 0x11, 0x11, 0x1E}},
      {'C', {0x0E, 0x11, 0x10, 0x10, 0x10, 0x11, 0x0E}}, {'D', {0x1C, 0x12, 0x11, 0x11, 0x11, 0x12, 0x1C}},
      {'E', {0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x1F}}, {'F', {0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x10}},
      {'G', {0x0E, 0x11, 0x10, 0x17, 0x11, 0x11, 0x0F}}, {'H', {0x11, 0x11, 0x11, 0x1F, 0x11, 0x11, 0x11}},
      {'I', {0x0E, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0E}}, {'J', {0x07, 0x02, 0x02, 0x02, 0x02, 0x12, 0x0C}},
      {'K', {0x11, 0x12, 0x14, 0x18, 0x14, 0x12, 0x11}}, {'L', {0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x1F}},
      {'M', {0x11, 0x1B, 0x15, 0x15, 0x11, 0x11, 0x11}}, {'N', {0x11, 0x11, 0x19, 0x15, 0x13, 0x11, 0x11}},
      {'O', {0x0E, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E}}, {'P', {0x1E, 0x11, 0x11, 0x1E, 0x10, 0x10, 0x10}},
      {'Q', {0x0E, 0x11, 0x11, 0x11, 0x15, 0x12, 0x0D}}, {'R', {0x1E, 0x11, 0x11, 0x1E, 0x14, 0x12, 0x11}},
      {'S', {0x0F, 0x10, 0x10, 0x0E, 0x01, 0x01, 0x1E}}, {'T', {0x1F, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04}},
      {'U', {0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E}}, {'V', {0x11, 0x11, 0x11, 0x11, 0x11, 0x0A, 0x04}},
      {'W', {0x11, 0x11, 0x11, 0x15, 0x15, 0x15, 0x0A}}, {'X', {0x11, 0x11, 0x0A, 0x04, 0x0A, 0x11, 0x11}},
      {'Y', {0x11, 0x11, 0x11, 0x0A, 0x04, 0x04, 0x04}}, {'Z', {0x1F, 0x01, 0x02, 0x04, 0x08, 0x10, 0x1F}},
      {'0', {0x0E, 0x11, 0x13, 0x15, 0x19, 0x11, 0x0E}}, {'1', {0x04, 0x0C, 0x04, 0x04, 0x04, 0x04, 0x0E}},
      {'2', {0x0E, 0x11, 0x01, 0x02, 0x04, 0x08, 0x1F}}, {'3', {0x1F, 0x02, 0x04, 0x02, 0x01, 0x11, 0x0E}},
      {'4', {0x02, 0x06, 0x0A, 0x12, 0x1F, 0x02, 0x02}}, {'5', {0x1F, 0x10, 0x1E, 0x01, 0x01, 0x11, 0x0E}},
      {'6', {0x06, 0x08, 0x10, 0x1E, 0x11, 0x11, 0x0E}}, {'7', {0x1F, 0x01, 0x02, 0x04, 0x08, 0x08, 0x08}},
      {'8', {0x0E, 0x11, 0x11, 0x0E, 0x11, 0x11, 0x0E}}, {'9', {0x0E, 0x11, 0x11, 0x0F, 0x01, 0x02, 0x0C}},
      {'.', {0, 0, 0, 0, 0, 0x0C, 0x0C}},               {',', {0, 0, 0, 0, 0x0C, 0x04, 0x08}},
      {'_', {0, 0, 0, 0, 0, 0, 0x1F}},                  {'-', {0, 0, 0, 0x1F, 0, 0, 0}},
      {'/', {0, 0x01, 0x02, 0x04, 0x08, 0x10, 0}},      {':', {0, 0x0C, 0x0C, 0, 0x0C, 0x0C, 0}},
      {'%', {0x18, 0x19, 0x02, 0x04, 0x08, 0x13, 0x03}}, {'(', {0x02, 0x04, 0x08, 0x08, 0x08, 0x04, 0x02}},
      {')', {0x08, 0x04, 0x02, 0x02, 0x02, 0x04, 0x08}}, {' ', {0, 0, 0, 0, 0, 0, 0}},
  };
  return *glyphs;
}

uint32_t Crc32(const std::string& data, size_t from) {
  static const auto* table = [] {
    auto* t = new std::array<uint32_t, 256>;
    for (uint32_t n = 0; n < 256; ++n) {
      uint32_t c = n;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      (*t)[n] = c;
    }
    return t;
  }();
  uint32_t crc = 0xFFFFFFFFu;
  for (size_t i = from; i < data.size(); ++i) {
    crc = (*table)[(crc ^ static_cast<uint8_t>(data[i])) & 0xFF] ^ (crc >> 8);
  }
  return crc ^ 0xFFFFFFFFu;
}

void PutBigEndian(std::string& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((v >> shift) & 0xFF));
}

void Chunk(std::string& png, const char type[5], const std::string& data) {
  PutBigEndian(png, static_cast<uint32_t>(data.size()));
  size_t start = png.size();
  png.append(type, 4);
  png += data;
  PutBigEndian(png, Crc32(png, start));
}

}  // namespace

Canvas::Canvas(int width, int height, Rgb background)
    : width_(width), height_(height), pixels_(static_cast<size_t>(width) * height * 3) {
  FillRect(0, 0, width, height, background);
}

void Canvas::FillRect(int x, int y, int w, int h, Rgb color) {
  for (int yy = std::max(0, y); yy < std::min(height_, y + h); ++yy) {
    for (int xx = std::max(0, x); xx < std::min(width_, x + w); ++xx) {
      uint8_t* p = &pixels_[(static_cast<size_t>(yy) * width_ + xx) * 3];
      p[0] = color.r;
      p[1] = color.g;
      p[2] = color.b;
    }
  }
}

void Canvas::Text(int x, int y, absl::string_view text, Rgb color, int scale) {
  for (size_t i = 0; i < text.size(); ++i) {
    char c = absl::ascii_toupper(static_cast<unsigned char>(text[i]));
    auto it = Glyphs().find(c);
    const int gx = x + static_cast<int>(i) * 6 * scale;
    if (it == Glyphs().end()) {  // unknown: an outlined box
      FillRect(gx, y, 5 * scale, scale, color);
      FillRect(gx, y + 6 * scale, 5 * scale, scale, color);
      continue;
    }
    for (int row = 0; row < 7; ++row) {
      for (int col = 0; col < 5; ++col) {
        if (it->second[row] & (0x10 >> col)) FillRect(gx + col * scale, y + row * scale, scale, scale, color);
      }
    }
  }
}

Rgb Canvas::At(int x, int y) const {
  const uint8_t* p = &pixels_[(static_cast<size_t>(y) * width_ + x) * 3];
  return Rgb{p[0], p[1], p[2]};
}

std::string Canvas::EncodePng() const {
  std::string png("\x89PNG\r\n\x1a\n", 8);
  std::string header;
  PutBigEndian(header, static_cast<uint32_t>(width_));
  PutBigEndian(header, static_cast<uint32_t>(height_));
  header += std::string("\x08\x02\x00\x00\x00", 5);  // 8 bits, RGB, deflate, no filter, no interlace
  Chunk(png, "IHDR", header);

  // The image data: each row a filter byte (0) and its pixels, in a zlib stream of
  // stored deflate blocks (at most 65535 bytes each) with its Adler-32 checksum.
  std::string raw;
  const size_t row_bytes = static_cast<size_t>(width_) * 3;
  for (int y = 0; y < height_; ++y) {
    raw.push_back('\0');
    raw.append(reinterpret_cast<const char*>(&pixels_[y * row_bytes]), row_bytes);
  }
  std::string z("\x78\x01", 2);
  for (size_t at = 0; at < raw.size() || at == 0; at += 65535) {
    const size_t n = std::min<size_t>(65535, raw.size() - at);
    z.push_back(at + n >= raw.size() ? '\x01' : '\x00');
    z.push_back(static_cast<char>(n & 0xFF));
    z.push_back(static_cast<char>(n >> 8));
    z.push_back(static_cast<char>(~n & 0xFF));
    z.push_back(static_cast<char>((~n >> 8) & 0xFF));
    z.append(raw, at, n);
    if (raw.empty()) break;
  }
  uint32_t a = 1, b = 0;
  for (unsigned char c : raw) {
    a = (a + c) % 65521;
    b = (b + a) % 65521;
  }
  PutBigEndian(z, (b << 16) | a);
  Chunk(png, "IDAT", z);
  Chunk(png, "IEND", "");
  return png;
}

}  // namespace ddplab

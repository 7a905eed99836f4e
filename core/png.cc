#include "core/png.h"

#include <algorithm>
#include <array>
#include <cstddef>
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

// Deflate's bit order: values LSB first, Huffman codes MSB first.
class BitWriter {
 public:
  explicit BitWriter(std::string& out) : out_(out) {}
  void Bits(uint32_t value, int count) {
    for (int k = 0; k < count; ++k) Bit((value >> k) & 1);
  }
  void Code(uint32_t code, int length) {
    for (int k = length - 1; k >= 0; --k) Bit((code >> k) & 1);
  }
  void Flush() {
    if (used_ > 0) out_.push_back(static_cast<char>(byte_));
    byte_ = used_ = 0;
  }

 private:
  void Bit(uint32_t b) {
    byte_ |= b << used_;
    if (++used_ == 8) Flush();
  }
  std::string& out_;
  uint32_t byte_ = 0;
  int used_ = 0;
};

// A literal/length symbol in deflate's fixed Huffman code (RFC 1951, 3.2.6).
void FixedSymbol(BitWriter& w, int symbol) {
  if (symbol < 144) {
    w.Code(0x30 + symbol, 8);
  } else if (symbol < 256) {
    w.Code(0x190 + symbol - 144, 9);
  } else if (symbol < 280) {
    w.Code(symbol - 256, 7);
  } else {
    w.Code(0xC0 + symbol - 280, 8);
  }
}

// One fixed-Huffman deflate block of `raw`, whose repetitions are coded as copies from one
// or `period` bytes back (a run of one byte, or of one pixel): a chart is flat colours, so
// this is nearly all the compression a general encoder would find, in a few lines.
std::string Deflate(const std::string& raw, int period) {
  static constexpr int kBase[] = {3,  4,  5,  6,  7,  8,  9,  10, 11,  13,  15,  17,  19,  23, 27,
                                  31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258};
  static constexpr int kExtra[] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2,
                                   2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
  std::string out;
  BitWriter w(out);
  w.Bits(1, 1);  // the last block
  w.Bits(1, 2);  // fixed Huffman codes
  const size_t n = raw.size();
  for (size_t i = 0; i < n;) {
    size_t best = 0, distance = 0;
    for (size_t d : {static_cast<size_t>(1), static_cast<size_t>(period)}) {
      if (d == 0 || d > i) continue;
      size_t len = 0;
      while (len < 258 && i + len < n && raw[i + len] == raw[i + len - d]) ++len;
      if (len > best) best = len, distance = d;
    }
    if (best < 3) {
      FixedSymbol(w, static_cast<uint8_t>(raw[i]));
      ++i;
      continue;
    }
    int code = 28;
    while (kBase[code] > static_cast<int>(best)) --code;
    FixedSymbol(w, 257 + code);
    w.Bits(static_cast<uint32_t>(best) - kBase[code], kExtra[code]);
    // Distances 1 to 4 are codes 0 to 3 with no extra bits (5 bits each, fixed).
    w.Code(static_cast<uint32_t>(distance - 1), 5);
    i += best;
  }
  FixedSymbol(w, 256);  // end of block
  w.Flush();
  return out;
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
  header += std::string("\x08\x02\x00\x00\x00", 5);  // 8 bits, RGB, deflate, filter method 0, no interlace
  Chunk(png, "IHDR", header);

  // The image data: each row a filter byte and its pixels, in a zlib stream. Filter 2
  // ("up") stores each byte less the one above it, so rows that repeat the last become
  // zeros; the deflate stream codes runs (Deflate above).
  std::string raw;
  const size_t row_bytes = static_cast<size_t>(width_) * 3;
  for (int y = 0; y < height_; ++y) {
    raw.push_back('\x02');
    for (size_t x = 0; x < row_bytes; ++x) {
      const uint8_t above = y > 0 ? pixels_[(y - 1) * row_bytes + x] : 0;
      raw.push_back(static_cast<char>(static_cast<uint8_t>(pixels_[y * row_bytes + x] - above)));
    }
  }
  std::string z("\x78\x01", 2);
  z += Deflate(raw, 3);
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

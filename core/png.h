// A small RGB canvas that draws rectangles and 5x7 text and encodes itself as PNG, for
// charts without a graphics library. The PNG's deflate stream is written here (fixed
// Huffman codes, runs coded as copies): every decoder reads it, it needs no zlib, and a
// chart of flat colours comes out some tens of KB rather than megabytes.
#ifndef DDPLAB_CORE_PNG_H_
#define DDPLAB_CORE_PNG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace ddplab {

struct Rgb {
  uint8_t r, g, b;
};

class Canvas {
 public:
  Canvas(int width, int height, Rgb background);
  int width() const { return width_; }
  int height() const { return height_; }
  void FillRect(int x, int y, int w, int h, Rgb color);
  // Draws `text` (letters, digits, and . , _ - / : % x ( ) and space) at (x, y), each
  // glyph 5x7 pixels scaled by `scale`, 6*scale apart. Other characters draw as boxes.
  void Text(int x, int y, absl::string_view text, Rgb color, int scale = 1);
  static int TextWidth(absl::string_view text, int scale = 1) {
    return static_cast<int>(text.size()) * 6 * scale;
  }
  Rgb At(int x, int y) const;
  std::string EncodePng() const;

 private:
  int width_, height_;
  std::vector<uint8_t> pixels_;  // RGB, row by row
};

}  // namespace ddplab

#endif  // DDPLAB_CORE_PNG_H_

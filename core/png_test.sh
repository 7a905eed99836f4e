#!/usr/bin/env bash
# The chart decodes with Python's own zlib and CRC-32: a valid PNG with the pixels drawn.
set -eu
png="$TEST_TMPDIR/chart.png"
"$TEST_SRCDIR/ddplab/core/testdata/write_chart" "$png"
python3 - "$png" <<'PY'
import struct, sys, zlib
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", "signature"
pos, chunks = 8, {}
while pos < len(data):
    n, kind = struct.unpack(">I4s", data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + n]
    crc, = struct.unpack(">I", data[pos + 8 + n:pos + 12 + n])
    assert zlib.crc32(kind + body) == crc, f"CRC of {kind}"
    chunks.setdefault(kind, b"")
    chunks[kind] += body
    pos += 12 + n
w, h, depth, color = struct.unpack(">IIBB", chunks[b"IHDR"][:10])
assert (depth, color) == (8, 2), "8-bit RGB"
raw = zlib.decompress(chunks[b"IDAT"])
assert len(raw) == h * (1 + 3 * w), "size"
# A chart of flat colours compresses: at least 10 to 1 (stored blocks would be 1 to 1).
assert len(chunks[b"IDAT"]) * 10 < len(raw), f"{len(chunks[b'IDAT'])} bytes for {len(raw)}"
# Undo the row filters (0 none, 1 sub, 2 up: what an encoder may use here).
rows, above = [], bytes(3 * w)
for y in range(h):
    kind, row = raw[y * (1 + 3 * w)], bytearray(raw[y * (1 + 3 * w) + 1:(y + 1) * (1 + 3 * w)])
    assert kind in (0, 1, 2), f"filter {kind}"
    for x in range(3 * w):
        if kind == 1 and x >= 3:
            row[x] = (row[x] + row[x - 3]) & 0xFF
        elif kind == 2:
            row[x] = (row[x] + above[x]) & 0xFF
    rows.append(bytes(row))
    above = rows[-1]
colors = {bytes(r[x:x + 3]) for r in rows for x in range(0, 3 * w, 3)}
for want in (b"\xff\xff\xff", b"\x00\x00\x00", b"\x2e\x6e\xb4", b"\xd6\x78\x28", b"\x78\x78\x78"):
    assert want in colors, f"missing color {want.hex()}"
print(f"png: {w}x{h}, 1 passed, 0 failed")
PY

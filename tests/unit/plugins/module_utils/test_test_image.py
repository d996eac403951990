"""The vision test pictures: valid PNGs, deterministic, showing what the prompts ask about."""
import hashlib
import struct
import zlib

import pytest

from ansible_collections.dgxspark.vllm.plugins.module_utils import _test_image as ti


def decode_png(data):
    """Minimal decoder for what the generator writes: 8-bit RGB, filter 0."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, chunks = 8, {}
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind = data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])
        assert crc == zlib.crc32(kind + body) & 0xFFFFFFFF, kind
        chunks[kind] = chunks.get(kind, b"") + body
        pos += 12 + length
    width, height, depth, color, _, _, _ = struct.unpack(">IIBBBBB", chunks[b"IHDR"])
    assert (depth, color) == (8, 2)
    raw = zlib.decompress(chunks[b"IDAT"])
    stride = 1 + 3 * width
    assert len(raw) == stride * height
    rows = []
    for y in range(height):
        line = raw[y * stride:(y + 1) * stride]
        assert line[0] == 0
        rows.append(line[1:])
    return width, height, lambda x, y: tuple(rows[y][3 * x:3 * x + 3])


@pytest.mark.parametrize("name", sorted(ti.IMAGES))
def test_png_is_valid_and_described(name):
    info = ti.describe(name)
    width, height, _ = decode_png(info["data"])
    assert (width, height) == (info["width"], info["height"])
    assert info["size"] == len(info["data"])
    assert info["sha256"] == hashlib.sha256(info["data"]).hexdigest()
    assert info["mime"] == "image/png"


@pytest.mark.parametrize("name", sorted(ti.IMAGES))
def test_bytes_are_deterministic(name):
    assert ti.render(name)[0] == ti.render(name)[0]


def test_the_two_pictures_differ():
    assert ti.describe("synthetic")["sha256"] != ti.describe("report")["sha256"]


def test_synthetic_has_red_square_left_blue_circle_right_black_text_below():
    _, _, px = decode_png(ti.render("synthetic")[0])
    assert px(128, 128) == ti.RED          # square centre
    assert px(50, 50) == ti.RED            # square corner
    assert px(384, 128) == ti.BLUE         # circle centre
    assert px(384 - 78, 128 - 78) == ti.WHITE  # outside the circle near its bounding-box corner
    below = {px(x, y) for x in range(0, 512, 2) for y in range(250, 330, 2)}
    assert ti.BLACK in below and ti.RED not in below


def test_report_has_title_bar_figures_and_bars():
    _, _, px = decode_png(ti.render("report")[0])
    assert px(5, 5) == ti.NAVY
    title = {px(x, y) for x in range(20, 560) for y in range(18, 46)}
    assert ti.WHITE in title
    figures = {px(x, y) for x in range(32, 400) for y in range(96, 240)}
    assert ti.BLACK in figures
    # the Q2 bar (largest figure) is the tallest
    heights = [sum(1 for y in range(200, 421) if px(x, y) == ti.BAR) for x in (460, 520, 580)]
    assert heights[1] > heights[0] > heights[2] > 0


def test_text_rendering_uses_the_glyphs():
    canvas = ti.Canvas(12, 8)
    canvas.text(0, 0, "I", ti.BLACK)
    # 'I' = top bar " ### ", stem in column 2
    assert [canvas.pixel(x, 0) == ti.BLACK for x in range(5)] == [False, True, True, True, False]
    assert canvas.pixel(2, 3) == ti.BLACK and canvas.pixel(0, 3) == ti.WHITE


def test_font_covers_every_string_shown():
    text = ti.SYNTHETIC_WORD + ti.REPORT_TITLE + ti.REPORT_FOOTER + "".join(q + ": " + f for q, f in ti.REPORT_FIGURES)
    assert set(text.upper()) <= set(ti.GLYPHS)
    for glyph in ti.GLYPHS.values():
        assert len(glyph) == 7 and all(len(row) == 5 for row in glyph)

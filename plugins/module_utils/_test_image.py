# -*- coding: utf-8 -*-
# Copyright: dgxspark.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Deterministic PNG test images for the vision smoke test, in pure Python.

Two pictures, the ones the field report used to check vision end to end:
``synthetic`` (a red square, a blue circle and the word SPARK) and ``report``
(a title bar, three dollar figures, a small bar chart and a footer). Same bytes
on every machine, so the sha256 of what was sent is known in advance.
"""

from __future__ import annotations

import hashlib
import struct
import zlib

WHITE = (255, 255, 255)
BLACK = (0, 0, 0)
RED = (220, 30, 30)
BLUE = (30, 60, 220)
NAVY = (20, 40, 90)
GREY = (90, 90, 90)
BAR = (60, 130, 90)

# 5x7 bitmap glyphs: seven rows of five columns, '#' = ink.
GLYPHS = {
    " ": ["     "] * 7,
    "A": [" ### ", "#   #", "#   #", "#####", "#   #", "#   #", "#   #"],
    "B": ["#### ", "#   #", "#   #", "#### ", "#   #", "#   #", "#### "],
    "C": [" ### ", "#   #", "#    ", "#    ", "#    ", "#   #", " ### "],
    "D": ["#### ", "#   #", "#   #", "#   #", "#   #", "#   #", "#### "],
    "E": ["#####", "#    ", "#    ", "#### ", "#    ", "#    ", "#####"],
    "F": ["#####", "#    ", "#    ", "#### ", "#    ", "#    ", "#    "],
    "G": [" ### ", "#   #", "#    ", "# ###", "#   #", "#   #", " ####"],
    "H": ["#   #", "#   #", "#   #", "#####", "#   #", "#   #", "#   #"],
    "I": [" ### ", "  #  ", "  #  ", "  #  ", "  #  ", "  #  ", " ### "],
    "J": ["  ###", "   # ", "   # ", "   # ", "   # ", "#  # ", " ##  "],
    "K": ["#   #", "#  # ", "# #  ", "##   ", "# #  ", "#  # ", "#   #"],
    "L": ["#    ", "#    ", "#    ", "#    ", "#    ", "#    ", "#####"],
    "M": ["#   #", "## ##", "# # #", "# # #", "#   #", "#   #", "#   #"],
    "N": ["#   #", "##  #", "# # #", "#  ##", "#   #", "#   #", "#   #"],
    "O": [" ### ", "#   #", "#   #", "#   #", "#   #", "#   #", " ### "],
    "P": ["#### ", "#   #", "#   #", "#### ", "#    ", "#    ", "#    "],
    "Q": [" ### ", "#   #", "#   #", "#   #", "# # #", "#  # ", " ## #"],
    "R": ["#### ", "#   #", "#   #", "#### ", "# #  ", "#  # ", "#   #"],
    "S": [" ####", "#    ", "#    ", " ### ", "    #", "    #", "#### "],
    "T": ["#####", "  #  ", "  #  ", "  #  ", "  #  ", "  #  ", "  #  "],
    "U": ["#   #", "#   #", "#   #", "#   #", "#   #", "#   #", " ### "],
    "V": ["#   #", "#   #", "#   #", "#   #", "#   #", " # # ", "  #  "],
    "W": ["#   #", "#   #", "#   #", "# # #", "# # #", "# # #", " # # "],
    "X": ["#   #", "#   #", " # # ", "  #  ", " # # ", "#   #", "#   #"],
    "Y": ["#   #", "#   #", " # # ", "  #  ", "  #  ", "  #  ", "  #  "],
    "Z": ["#####", "    #", "   # ", "  #  ", " #   ", "#    ", "#####"],
    "0": [" ### ", "#   #", "#  ##", "# # #", "##  #", "#   #", " ### "],
    "1": ["  #  ", " ##  ", "  #  ", "  #  ", "  #  ", "  #  ", " ### "],
    "2": [" ### ", "#   #", "    #", "   # ", "  #  ", " #   ", "#####"],
    "3": ["#####", "   # ", "  #  ", "   # ", "    #", "#   #", " ### "],
    "4": ["   # ", "  ## ", " # # ", "#  # ", "#####", "   # ", "   # "],
    "5": ["#####", "#    ", "#### ", "    #", "    #", "#   #", " ### "],
    "6": ["  ## ", " #   ", "#    ", "#### ", "#   #", "#   #", " ### "],
    "7": ["#####", "    #", "   # ", "  #  ", " #   ", " #   ", " #   "],
    "8": [" ### ", "#   #", "#   #", " ### ", "#   #", "#   #", " ### "],
    "9": [" ### ", "#   #", "#   #", " ####", "    #", "   # ", " ##  "],
    "$": ["  #  ", " ####", "# #  ", " ### ", "  # #", "#### ", "  #  "],
    ",": ["     ", "     ", "     ", "     ", " ##  ", "  #  ", " #   "],
    ".": ["     ", "     ", "     ", "     ", "     ", " ##  ", " ##  "],
    ":": ["     ", " ##  ", " ##  ", "     ", " ##  ", " ##  ", "     "],
    "-": ["     ", "     ", "     ", "#####", "     ", "     ", "     "],
}

# What each picture shows; the validate role asks about these and, on real
# hardware, expects them back in the answer.
SYNTHETIC_WORD = "SPARK"
REPORT_TITLE = "QUARTERLY SALES REPORT"
REPORT_FIGURES = (("Q1", "$1,240,000"), ("Q2", "$1,890,000"), ("Q3", "$1,050,000"))
REPORT_FOOTER = "PREPARED BY: FINANCE DEPT"


class Canvas:
    """An RGB raster with the few drawing operations the two pictures need."""

    def __init__(self, width, height, background=WHITE):
        self.width = width
        self.height = height
        self.rows = [bytearray(bytes(background) * width) for _row in range(height)]

    def pixel(self, x, y):
        row = self.rows[y]
        return tuple(row[3 * x:3 * x + 3])

    def rect(self, x0, y0, x1, y1, color):
        """Fill the rectangle [x0, x1) x [y0, y1), clipped to the canvas."""
        x0, x1 = max(0, x0), min(self.width, x1)
        if x1 <= x0:
            return
        span = bytes(color) * (x1 - x0)
        for y in range(max(0, y0), min(self.height, y1)):
            self.rows[y][3 * x0:3 * x1] = span

    def circle(self, cx, cy, radius, color):
        for dy in range(-radius, radius + 1):
            # widest integer half-span inside the circle on this row
            half = int((radius * radius - dy * dy) ** 0.5)
            self.rect(cx - half, cy + dy, cx + half + 1, cy + dy + 1, color)

    def text(self, x, y, text, color, scale=1):
        """Draw text in the 5x7 font; each glyph cell is 6x8 units (one unit of spacing)."""
        for index, char in enumerate(text.upper()):
            glyph = GLYPHS[char]
            gx = x + index * 6 * scale
            for row, bits in enumerate(glyph):
                for col, bit in enumerate(bits):
                    if bit == "#":
                        self.rect(gx + col * scale, y + row * scale,
                                  gx + (col + 1) * scale, y + (row + 1) * scale, color)

    @staticmethod
    def text_width(text, scale=1):
        return len(text) * 6 * scale - scale

    def png(self):
        """Encode as an 8-bit RGB PNG (filter 0 on every row, fixed zlib level)."""
        raw = b"".join(b"\x00" + bytes(row) for row in self.rows)

        def chunk(kind, data):
            body = kind + data
            return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)

        header = struct.pack(">IIBBBBB", self.width, self.height, 8, 2, 0, 0, 0)
        return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
                + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def synthetic():
    """A red square (left), a blue circle (right) and SPARK in black underneath."""
    canvas = Canvas(512, 384)
    canvas.rect(48, 48, 208, 208, RED)
    canvas.circle(384, 128, 80, BLUE)
    scale = 8
    canvas.text((512 - Canvas.text_width(SYNTHETIC_WORD, scale)) // 2, 264, SYNTHETIC_WORD, BLACK, scale)
    return canvas


def report():
    """A finance report: title bar, three quarter figures, bars to match, a footer."""
    canvas = Canvas(640, 480)
    canvas.rect(0, 0, 640, 64, NAVY)
    canvas.text(20, 18, REPORT_TITLE, WHITE, 4)
    values = []
    for row, (quarter, figure) in enumerate(REPORT_FIGURES):
        y = 96 + row * 56
        canvas.text(32, y, quarter + ": " + figure, BLACK, 4)
        values.append(int(figure.strip("$").replace(",", "")))
    # a small bar chart, heights proportional to the figures
    base, top = 420, 280
    peak = max(values)
    for index, value in enumerate(values):
        height = (base - top) * value // peak
        x = 440 + index * 60
        canvas.rect(x, base - height, x + 40, base, BAR)
    canvas.rect(430, base, 630, base + 2, GREY)
    canvas.text(20, 448, REPORT_FOOTER, GREY, 3)
    return canvas


IMAGES = {"synthetic": synthetic, "report": report}


def render(name):
    """Return (png_bytes, width, height) for one of IMAGES."""
    canvas = IMAGES[name]()
    return canvas.png(), canvas.width, canvas.height


def describe(name):
    """PNG bytes plus what a test needs to know about them."""
    data, width, height = render(name)
    return {
        "name": name,
        "mime": "image/png",
        "width": width,
        "height": height,
        "size": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "data": data,
    }

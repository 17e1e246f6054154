"""Corrupts the SPIR-V of an artifact and fixes up the section's CRC32 (docs/artifact.md), so the
loader's CRC check passes and the runtime's own SPIR-V check is what must catch it:
spirv_corrupt.py IN.rxm OUT.rxm KIND, KIND one of
  magic     the magic number
  version   the version word (SPIR-V 9.0)
  bound     the id bound (0)
  wordcount the first instruction's word count (0)
  overrun   the last instruction's word count (past the end of the module)
  truncate  the module cut by 2 bytes (not a whole number of words)
  short     the first OpTypeStruct's word count 1 (fewer than its result id needs; the
            validation layer used to crash on it)
  id        the first OpTypeStruct's result id past the bound"""
import struct
import sys
import zlib

src, dst, kind = sys.argv[1:4]
data = bytearray(open(src, "rb").read())
count = struct.unpack_from("<I", data, 8)[0]
entries = []
for i in range(count):
    e = 16 + i * 88
    name = bytes(data[e:e + 64]).rstrip(b"\0").decode()
    off, size = struct.unpack_from("<QQ", data, e + 64)
    entries.append([e, name, off, size])
spv = [x for x in entries if x[1].endswith(".spv")]
assert spv, "no SPIR-V section"
e, name, off, size = spv[0]
words = list(struct.unpack_from("<%dI" % (size // 4), data, off))
if kind == "magic":
    words[0] = 0x03022307
elif kind == "version":
    words[1] = 0x00090000
elif kind == "bound":
    words[3] = 0
elif kind == "wordcount":
    words[5] &= 0xFFFF
elif kind == "overrun":
    i = 5
    while i + (words[i] >> 16) < len(words):
        i += words[i] >> 16
    words[i] = (words[i] & 0xFFFF) | (len(words) - i + 7) << 16
elif kind in ("short", "id"):
    i = 5
    while words[i] & 0xFFFF != 30:  # OpTypeStruct
        i += words[i] >> 16
    if kind == "short":
        words[i] = 30 | 1 << 16
    else:
        words[i + 1] = words[3] + 5
elif kind != "truncate":
    sys.exit("unknown kind " + kind)
struct.pack_into("<%dI" % len(words), data, off, *words)
if kind == "truncate":
    # the section 2 bytes shorter: its size in the table; the bytes stay (sections are not
    # required to be contiguous)
    size -= 2
    struct.pack_into("<Q", data, e + 72, size)
struct.pack_into("<I", data, e + 80, zlib.crc32(bytes(data[off:off + size])) & 0xFFFFFFFF)
open(dst, "wb").write(bytes(data))
